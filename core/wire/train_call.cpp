#include "wire/train_call.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

namespace parasync {

namespace {

using google::protobuf::internal::WireFormatLite;

// The field number of the last member of `oneof` on the top level of the
// serialized message -- the one protobuf keeps -- or 0 if there is none.
// Reads only tags and lengths: a pushed tensor's bytes are skipped, not
// touched. Bytes that are no message stop the scan; the parse after it
// refuses them.
int lastOneofMember(google::protobuf::io::CodedInputStream &input, const google::protobuf::OneofDescriptor &oneof)
{
    const google::protobuf::Descriptor &message = *oneof.containing_type();
    int last = 0;
    for (uint32_t tag = input.ReadTag(); tag != 0; tag = input.ReadTag()) {
        const int number = WireFormatLite::GetTagFieldNumber(tag);
        if (const auto *field = message.FindFieldByNumber(number); field && field->containing_oneof() == &oneof)
            last = number;
        if (!WireFormatLite::SkipField(&input, tag))
            break;
    }
    return last;
}

// Clears `message` for a parse (merging into a cleared message is parsing
// into it); when the next message is a push too, the push's own Clear()
// keeps its repeated fields' capacity. Everything else goes as Clear()
// would take it.
template<typename Message>
void clearKeepingPush(Message *message, bool nextIsPush)
{
    if (message->has_push() && nextIsPush) {
        auto *kept = message->release_push();
        kept->Clear();
        message->Clear();
        message->set_allocated_push(kept);
    } else {
        message->Clear();
    }
}

template<typename Message>
bool nextIsPush(google::protobuf::io::CodedInputStream &input)
{
    const google::protobuf::FieldDescriptor &push
        = *Message::descriptor()->FindFieldByNumber(Message::kPushFieldNumber);
    return lastOneofMember(input, *push.containing_oneof()) == push.number();
}

template<typename Message>
bool parseKeepingPush(grpc::ByteBuffer &buffer, Message *message)
{
    if (message->has_push()) {
        grpc::ProtoBufferReader reader(&buffer);
        google::protobuf::io::CodedInputStream input(&reader);
        clearKeepingPush(message, nextIsPush<Message>(input));
    } else {
        message->Clear();
    }
    grpc::ProtoBufferReader reader(&buffer);
    const bool parsed = message->MergeFromBoundedZeroCopyStream(&reader, int(buffer.Length()));
    buffer.Clear();
    return parsed;
}

template<typename Message>
bool parseKeepingPush(const std::string &bytes, Message *message)
{
    if (bytes.size() > size_t(std::numeric_limits<int>::max()))
        return false;
    if (message->has_push()) {
        google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t *>(bytes.data()),
                                                     int(bytes.size()));
        clearKeepingPush(message, nextIsPush<Message>(input));
    } else {
        message->Clear();
    }
    return message->MergeFromString(bytes);
}

static_assert(std::endian::native == std::endian::little,
              "a packed float field is little-endian on the wire: sharing the values needs a little-endian host");

void appendTag(std::string *out, int field)
{
    google::protobuf::io::StringOutputStream stream(out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
}

void appendLength(std::string *out, size_t length)
{
    google::protobuf::io::StringOutputStream stream(out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteVarint64(length);
}

size_t lengthDelimitedSize(int field, size_t length)
{
    return google::protobuf::io::CodedOutputStream::VarintSize32(
               WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED))
           + google::protobuf::io::CodedOutputStream::VarintSize64(length) + length;
}

// Below 64 KiB of values a copy costs less than the pieces sharing needs
// (bench_roundtrip: 9 more allocations per 2-float step, each end).
constexpr size_t kShareFromBytes = 64 * 1024;

size_t valueBytes(const TensorValues &values)
{
    size_t bytes = 0;
    for (std::span<const float> v : values)
        bytes += v.size_bytes();
    return bytes;
}

// A message whose one field is `push` (field `pushField`), whose field
// `tensorsField` holds tensors whose values are `values` (one span per
// tensor) and not in the tensors themselves: protobuf writes everything but
// those values, whose slices point at where they lie.
template<typename Push>
bool serializeSharing(Push *push, int pushField, google::protobuf::RepeatedPtrField<proto::Tensor> *tensors,
                      int tensorsField, const TensorValues &values, grpc::ByteBuffer *buffer)
{
    constexpr int valuesField = proto::Tensor::kValuesFieldNumber;
    // The tensors are moved out (a pointer swap) while the rest is written.
    google::protobuf::RepeatedPtrField<proto::Tensor> moved;
    moved.Swap(tensors);
    std::string head;
    const bool written = push->AppendToString(&head);
    std::vector<std::string> tensorHeads(size_t(moved.size()));
    size_t pushLength = head.size();
    for (int i = 0; written && i < moved.size(); ++i) {
        proto::Tensor &tensor = moved[i];
        google::protobuf::RepeatedField<float> kept;
        kept.Swap(tensor.mutable_values());
        std::string &tensorHead = tensorHeads[size_t(i)];
        tensor.AppendToString(&tensorHead);
        kept.Swap(tensor.mutable_values());
        const size_t bytes = values[size_t(i)].size_bytes();
        // Protobuf writes no field for an empty packed list; nor does this.
        const size_t tensorLength = tensorHead.size() + (bytes > 0 ? lengthDelimitedSize(valuesField, bytes) : 0);
        pushLength += lengthDelimitedSize(tensorsField, tensorLength);
        std::string prefix;
        appendTag(&prefix, tensorsField);
        appendLength(&prefix, tensorLength);
        tensorHead.insert(0, prefix);
        if (bytes > 0) {
            appendTag(&tensorHead, valuesField);
            appendLength(&tensorHead, bytes);
        }
    }
    moved.Swap(tensors);
    if (!written)
        return false;

    std::string first;
    appendTag(&first, pushField);
    appendLength(&first, pushLength);
    first += head;
    std::vector<grpc::Slice> slices;
    slices.reserve(2 * tensorHeads.size() + 1);
    std::string pending = std::move(first);
    for (size_t i = 0; i < tensorHeads.size(); ++i) {
        pending += tensorHeads[i];
        if (values[i].empty())
            continue;
        slices.emplace_back(pending);
        pending.clear();
        slices.emplace_back(values[i].data(), values[i].size_bytes(), grpc::Slice::STATIC_SLICE);
    }
    if (!pending.empty())
        slices.emplace_back(pending);
    grpc::ByteBuffer shared(slices.data(), slices.size());
    buffer->Swap(&shared);
    return true;
}

// Small gradients go in the message: copied into its tensors.
void copyIntoTensors(const TensorValues &gradients, proto::PushRequest *push)
{
    for (size_t i = 0; i < gradients.size(); ++i)
        push->mutable_gradients(int(i))->mutable_values()->Add(gradients[i].begin(), gradients[i].end());
}

// The values of `tensors`, where they lie.
TensorValues valuesOf(const google::protobuf::RepeatedPtrField<proto::Tensor> &tensors)
{
    TensorValues values;
    values.reserve(size_t(tensors.size()));
    for (const proto::Tensor &tensor : tensors)
        values.emplace_back(tensor.values().data(), size_t(tensor.values_size()));
    return values;
}

// Appends the field `tag` starts, read from `in`, to `out` as it was (the
// tag too: SkipField() writes it).
bool copyField(google::protobuf::io::CodedInputStream &in, uint32_t tag, std::string *out)
{
    google::protobuf::io::StringOutputStream stream(out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    return WireFormatLite::SkipField(&in, tag, &coded);
}

// Appends field `field` holding `body` (a message) to `out`.
void appendMessageField(std::string *out, int field, const std::string &body)
{
    appendTag(out, field);
    appendLength(out, body.size());
    out->append(body);
}

// Reads a message field's length and limits `in` to it. A length that runs
// past the message around it is refused here: PushLimit() would quietly cut
// it to that message's end.
bool enterMessage(google::protobuf::io::CodedInputStream &in, google::protobuf::io::CodedInputStream::Limit *limit)
{
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) || length > uint32_t(in.BytesUntilTotalBytesLimit()))
        return false;
    if (const int around = in.BytesUntilLimit(); around >= 0 && length > uint32_t(around))
        return false;
    *limit = in.PushLimit(int(length));
    return true;
}

// Whether the message `in` is limited to ended where its length said:
// ReadTag() returns 0 at the limit, but also at the end of the bytes and on
// a tag that is no tag.
bool endedAtLimit(google::protobuf::io::CodedInputStream &in)
{
    return in.ConsumedEntireMessage() && in.BytesUntilLimit() == 0;
}

uint32_t lengthDelimitedTag(int field)
{
    return WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

const google::protobuf::MethodDescriptor &trainMethod()
{
    static const google::protobuf::MethodDescriptor *method
        = proto::TrainRequest::descriptor()->file()->FindServiceByName("ParameterService")->FindMethodByName("Train");
    return *method;
}

} // namespace

bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainRequest *request)
{
    return parseKeepingPush(buffer, request);
}

bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainResponse *response)
{
    return parseKeepingPush(buffer, response);
}

bool parseKeepingStorage(const std::string &bytes, proto::TrainRequest *request)
{
    return parseKeepingPush(bytes, request);
}

bool parseKeepingStorage(const std::string &bytes, proto::TrainResponse *response)
{
    return parseKeepingPush(bytes, response);
}

bool serialize(const google::protobuf::MessageLite &message, grpc::ByteBuffer *buffer)
{
    buffer->Clear(); // gRPC's writer asserts that it starts empty
    bool ownBuffer = false;
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(message, buffer, &ownBuffer)
        .ok();
}

bool serializeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, grpc::ByteBuffer *buffer)
{
    proto::PushRequest *push = request.mutable_push();
    if (size_t(push->gradients_size()) != gradients.size())
        return false;
    for (const proto::Tensor &tensor : push->gradients())
        if (tensor.values_size() != 0)
            return false; // values in two places: which would be sent?
    if (valueBytes(gradients) < kShareFromBytes) {
        copyIntoTensors(gradients, push);
        return serialize(request, buffer);
    }
    return serializeSharing(push, proto::TrainRequest::kPushFieldNumber, push->mutable_gradients(),
                            proto::PushRequest::kGradientsFieldNumber, gradients, buffer);
}

bool serializeSharingValues(proto::TrainResponse &response, grpc::ByteBuffer *buffer)
{
    if (!response.has_push())
        return serialize(response, buffer);
    proto::PushResponse *push = response.mutable_push();
    const TensorValues values = valuesOf(push->parameters());
    if (valueBytes(values) < kShareFromBytes)
        return serialize(response, buffer);
    return serializeSharing(push, proto::TrainResponse::kPushFieldNumber, push->mutable_parameters(),
                            proto::PushResponse::kParametersFieldNumber, values, buffer);
}

ParameterDelivery AnswerReader::read(grpc::ByteBuffer &buffer, proto::TrainResponse *response,
                                     const TensorDestinations &destinations)
{
    if (!deliver(buffer, destinations))
        return parseKeepingStorage(buffer, response) ? ParameterDelivery::InMessage : ParameterDelivery::Malformed;
    buffer.Clear();
    clearKeepingPush(response, true);
    return response->MergeFromString(m_rest) ? ParameterDelivery::Delivered : ParameterDelivery::Malformed;
}

bool AnswerReader::deliver(grpc::ByteBuffer &buffer, const TensorDestinations &destinations)
{
    using google::protobuf::io::CodedInputStream;
    grpc::ProtoBufferReader reader(&buffer);
    CodedInputStream in(&reader);
    // The answer is one field, its push: anything else (a join, two pushes
    // that protobuf would merge, a field of a later .proto) is left to
    // protobuf's own parse.
    CodedInputStream::Limit pushLimit;
    if (in.ReadTag() != lengthDelimitedTag(proto::TrainResponse::kPushFieldNumber) || !enterMessage(in, &pushLimit))
        return false;
    m_push.clear();
    size_t tensors = 0;
    for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
        if (tag != lengthDelimitedTag(proto::PushResponse::kParametersFieldNumber)) {
            if (!copyField(in, tag, &m_push))
                return false;
            continue;
        }
        CodedInputStream::Limit tensorLimit;
        if (tensors == destinations.size() || !enterMessage(in, &tensorLimit))
            return false;
        const std::span<float> to = destinations[tensors];
        m_tensor.clear();
        bool delivered = false;
        for (uint32_t field = in.ReadTag(); field != 0; field = in.ReadTag()) {
            if (WireFormatLite::GetTagFieldNumber(field) != proto::Tensor::kValuesFieldNumber) {
                if (!copyField(in, field, &m_tensor))
                    return false;
                continue;
            }
            // One packed run of exactly the destination's size. A second
            // run, or values written one by one, are legal protobuf too:
            // protobuf's parse takes those.
            uint32_t length = 0;
            if (delivered || field != lengthDelimitedTag(proto::Tensor::kValuesFieldNumber) || !in.ReadVarint32(&length)
                || length != to.size_bytes() || !in.ReadRaw(to.data(), int(length)))
                return false;
            delivered = true;
        }
        if (!endedAtLimit(in) || (!delivered && !to.empty()))
            return false;
        in.PopLimit(tensorLimit);
        appendMessageField(&m_push, proto::PushResponse::kParametersFieldNumber, m_tensor);
        ++tensors;
    }
    if (!endedAtLimit(in) || tensors != destinations.size())
        return false;
    in.PopLimit(pushLimit);
    if (in.ReadTag() != 0 || !in.ConsumedEntireMessage())
        return false;
    m_rest.clear();
    appendMessageField(&m_rest, proto::TrainResponse::kPushFieldNumber, m_push);
    return true;
}

const char *trainMethodPath()
{
    static const std::string path = "/" + trainMethod().service()->full_name() + "/" + trainMethod().name();
    return path.c_str();
}

int trainMethodIndex()
{
    return trainMethod().index();
}

TrainCall::TrainCall(grpc::ChannelInterface &channel, grpc::ClientContext &context)
    : m_context(context)
    , m_stream(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          &channel, grpc::internal::RpcMethod(trainMethodPath(), grpc::internal::RpcMethod::BIDI_STREAMING), &context))
{
}

TrainCall::~TrainCall()
{
    if (m_streamWatch.joinable()) {
        m_context.TryCancel();
        m_streamWatch.join();
    }
}

void TrainCall::watchStreamEnd()
{
    grpc::ByteBuffer nothing;
    while (m_stream->Read(&nothing)) {
        // The ps sends nothing on a stream whose answers go on the link.
    }
    {
        std::lock_guard lock(m_streamMutex);
        m_streamEnded = true;
    }
    m_streamEndedChanged.notify_all();
    m_link->shutdown();
}

bool TrainCall::writeFrame(const google::protobuf::MessageLite &message, const TensorValues &values,
                           LinkWrite linkWrite)
{
    // The frame of an overlapped write is still going out until then.
    if (!m_link->finishWrites())
        return linkFailed(m_link->error());
    DataLink::startFrame(&m_frameOut);
    if (!message.AppendToString(&m_frameOut))
        return false;
    return m_link->writeFrame(m_frameOut, values, linkWrite == LinkWrite::Overlapped) || linkFailed(m_link->error());
}

bool TrainCall::write(const proto::TrainRequest &request)
{
    grpc::ByteBuffer out;
    if (m_messages && (!request.has_push() || valueBytes(valuesOf(request.push().gradients())) < kShareFromBytes))
        return writeFrame(request, {}, LinkWrite::Here);
    if (!m_link || !request.has_push())
        return serialize(request, &out) && m_stream->Write(out);
    // On a linked stream every push sends its values on the link: a copy
    // without them goes on the stream, and they go from the request's own
    // tensors before this returns.
    proto::TrainRequest linked = request;
    for (auto &tensor : *linked.mutable_push()->mutable_gradients())
        tensor.clear_values();
    TensorValues values;
    for (const auto &tensor : request.push().gradients())
        values.emplace_back(tensor.values().data(), size_t(tensor.values_size()));
    linked.mutable_push()->set_values_on_data_link(true);
    if (m_messages)
        return writeFrame(linked, values, LinkWrite::Here);
    if (!serialize(linked, &out) || !m_stream->Write(out))
        return false;
    size_t bytes = 0;
    for (const auto &v : values)
        bytes += v.size_bytes();
    if (bytes == 0)
        return true; // a decision (PushRequest.update) brings none
    return m_link->write(values) || linkFailed(m_link->error());
}

bool TrainCall::writeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, LinkWrite linkWrite)
{
    grpc::ByteBuffer out;
    if (!m_link)
        return serializeSharingValues(request, gradients, &out) && m_stream->Write(out);
    // The tensors carry their shapes; the values go on the link from where
    // they lie, while the stream (or the frame before them) carries the rest.
    if (size_t(request.push().gradients_size()) != gradients.size())
        return false;
    if (m_messages && valueBytes(gradients) < kShareFromBytes) {
        for (const proto::Tensor &tensor : request.push().gradients())
            if (tensor.values_size() != 0)
                return false; // values in two places, as serializeSharingValues refuses
        copyIntoTensors(gradients, request.mutable_push());
        return writeFrame(request, {}, linkWrite);
    }
    request.mutable_push()->set_values_on_data_link(true);
    if (m_messages)
        return writeFrame(request, gradients, linkWrite);
    if (!serialize(request, &out) || !m_stream->Write(out))
        return false;
    const bool sent = linkWrite == LinkWrite::Overlapped ? m_link->startWrite(gradients) : m_link->write(gradients);
    return sent || linkFailed(m_link->error());
}

bool TrainCall::finishWrites()
{
    return !m_link || m_link->finishWrites() || linkFailed(m_link->error());
}

bool TrainCall::linkFailed(const std::string &what)
{
    m_linkError = what;
    if (m_messages) {
        // A ps that ends the stream closes the link first: wait a moment for
        // its reason, which finish() then returns rather than the link's end.
        std::unique_lock lock(m_streamMutex);
        m_streamEndedChanged.wait_for(lock, std::chrono::seconds(1), [this] { return m_streamEnded; });
    }
    return false;
}

bool TrainCall::read(proto::TrainResponse *response)
{
    bool delivered = false;
    return read(response, {}, &delivered);
}

bool TrainCall::read(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered)
{
    *delivered = false;
    // The ps answers only once it has every value: they must have gone.
    if (!finishWrites())
        return false;
    if (m_messages)
        return readFrame(response, destinations, delivered);
    if (!m_stream->Read(&m_in))
        return false;
    m_lastReadBytes = m_in.Length();
    if (!m_link) {
        if (destinations.empty())
            return parseKeepingStorage(m_in, response);
        const ParameterDelivery delivery = m_answers.read(m_in, response, destinations);
        *delivered = delivery == ParameterDelivery::Delivered;
        return delivery != ParameterDelivery::Malformed;
    }
    if (!parseKeepingStorage(m_in, response))
        return false;
    if (!response->has_push() || !response->push().values_on_data_link())
        return true;
    return readLinkedAnswer(response, destinations, delivered);
}

bool TrainCall::readFrame(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered)
{
    // The stream's bound on a message is the bound here too.
    switch (m_link->readFrame(&m_frameIn, size_t(std::numeric_limits<int32_t>::max()), nullptr)) {
    case DataLink::FrameRead::Read: break;
    case DataLink::FrameRead::Closed: return linkFailed("the ps closed the data link");
    default: return linkFailed(m_link->error());
    }
    m_lastReadBytes = kFrameLengthBytes + m_frameIn.size();
    if (!parseKeepingStorage(m_frameIn, response))
        return linkFailed("the ps's answer on the data link is no parasync.proto.TrainResponse");
    if (!response->has_push())
        return true;
    if (response->push().values_on_data_link())
        return readLinkedAnswer(response, destinations, delivered);
    // A small answer carries its values: to where they go when they fit.
    const auto &parameters = response->push().parameters();
    if (destinations.empty() || size_t(parameters.size()) != destinations.size())
        return true;
    for (int i = 0; i < parameters.size(); ++i)
        if (size_t(parameters[i].values_size()) != destinations[size_t(i)].size())
            return true;
    for (int i = 0; i < parameters.size(); ++i)
        std::copy(parameters[i].values().begin(), parameters[i].values().end(), destinations[size_t(i)].begin());
    *delivered = true;
    return true;
}

bool TrainCall::readLinkedAnswer(proto::TrainResponse *response, const TensorDestinations &destinations,
                                 bool *delivered)
{
    auto &parameters = *response->mutable_push()->mutable_parameters();
    bool fits = size_t(parameters.size()) == destinations.size();
    for (int i = 0; fits && i < parameters.size(); ++i) {
        int64_t count = 1;
        for (const int64_t d : parameters[i].shape())
            count = d < 0 || count > (int64_t(1) << 40) ? -1 : count * d;
        fits = parameters[i].values_size() == 0 && count == int64_t(destinations[size_t(i)].size());
    }
    const uint64_t before = m_link->bytesReceived();
    if (fits) {
        if (!m_link->read(destinations))
            return linkFailed(m_link->error());
        *delivered = true;
    } else {
        // Not the worker's rows: into the tensors, where readParameters()
        // says what does not fit. Bounded as the stream bounds a message.
        std::string error;
        if (!sizeForLinkedValues(parameters, std::numeric_limits<int32_t>::max() / 4, &m_scratch, &error))
            return linkFailed("the ps's answer cannot be read from the data link: " + error);
        if (!m_link->read(m_scratch))
            return linkFailed(m_link->error());
    }
    m_lastReadBytes += size_t(m_link->bytesReceived() - before);
    return true;
}

bool TrainCall::openDataLink(DataLinkContext &context, const std::string &host, const proto::DataLinkGrant &grant,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds stall, std::string *error)
{
    if (grant.port() <= 0 || grant.port() > 65535 || grant.nonce().size() != kNonceBytes) {
        *error = "the ps granted a data link that cannot be connected (port " + std::to_string(grant.port()) + ", "
                 + std::to_string(grant.nonce().size()) + "-byte nonce)";
        return false;
    }
    m_link = DataLink::connect(context, host, grant.port(), grant.nonce(), timeout, stall, error);
    if (m_link && grant.messages()) {
        m_messages = true;
        m_streamWatch = std::thread([this] { watchStreamEnd(); });
    }
    return m_link != nullptr;
}

bool TrainCall::writesDone()
{
    return m_stream->WritesDone();
}

grpc::Status TrainCall::finish()
{
    // Finish() may only follow the last Read(): the watch's.
    if (m_streamWatch.joinable())
        m_streamWatch.join();
    grpc::Status status = m_stream->Finish();
    // The worker cancels a stream whose link broke: the link says why.
    if (!m_linkError.empty() && (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED))
        return {grpc::StatusCode::UNAVAILABLE, m_linkError};
    return status;
}

bool sizeForLinkedValues(google::protobuf::RepeatedPtrField<proto::Tensor> &tensors, int64_t maxValues,
                         TensorDestinations *destinations, std::string *error)
{
    destinations->clear();
    int64_t total = 0;
    for (int i = 0; i < tensors.size(); ++i) {
        proto::Tensor &tensor = tensors[i];
        if (tensor.values_size() != 0) {
            *error = "tensor " + std::to_string(i) + " carries " + std::to_string(tensor.values_size())
                     + " values in the message although values_on_data_link is set: send them on the link only";
            return false;
        }
        int64_t count = 1;
        for (const int64_t d : tensor.shape()) {
            if (d < 0) {
                *error = "tensor " + std::to_string(i) + " has a negative dimension (" + std::to_string(d) + ")";
                return false;
            }
            if (d != 0 && count > maxValues / d) {
                count = maxValues + 1;
                break;
            }
            count *= d;
        }
        total += count;
        if (total > maxValues) {
            *error = "the tensors' shapes hold more than " + std::to_string(maxValues)
                     + " values, more than a message may carry (--max_message_bytes)";
            return false;
        }
    }
    for (auto &tensor : tensors) {
        const int64_t count = [&] {
            int64_t c = 1;
            for (const int64_t d : tensor.shape())
                c *= d;
            return c;
        }();
        auto *values = tensor.mutable_values();
        values->Reserve(int(count));
        float *first = count > 0 ? values->AddNAlreadyReserved(int(count)) : nullptr;
        destinations->emplace_back(first, size_t(count));
    }
    return true;
}

} // namespace parasync
