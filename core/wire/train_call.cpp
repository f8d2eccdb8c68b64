#include "wire/train_call.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <bit>
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
int lastOneofMember(grpc::ByteBuffer &buffer, const google::protobuf::OneofDescriptor &oneof)
{
    grpc::ProtoBufferReader reader(&buffer);
    google::protobuf::io::CodedInputStream input(&reader);
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

template<typename Message>
bool parseKeepingPush(grpc::ByteBuffer &buffer, Message *message)
{
    const google::protobuf::FieldDescriptor &push
        = *Message::descriptor()->FindFieldByNumber(Message::kPushFieldNumber);
    if (message->has_push() && lastOneofMember(buffer, *push.containing_oneof()) == push.number()) {
        // Everything but the push goes as Clear() would take it; the push's
        // own Clear() keeps its repeated fields' capacity, and merging into
        // it is parsing into it.
        auto *kept = message->release_push();
        kept->Clear();
        message->Clear();
        message->set_allocated_push(kept);
    } else {
        message->Clear();
    }
    grpc::ProtoBufferReader reader(&buffer);
    const bool parsed = message->MergeFromBoundedZeroCopyStream(&reader, int(buffer.Length()));
    buffer.Clear();
    return parsed;
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

// `message`, whose one field is `push` (field `pushField`), whose field
// `tensorsField` holds the tensors whose values are shared. Protobuf writes
// everything but those values; the values' slices point at the tensors'
// storage.
template<typename Message, typename Push>
bool serializeSharing(const Message &message, Push *push, int pushField,
                      google::protobuf::RepeatedPtrField<proto::Tensor> *tensors, int tensorsField,
                      grpc::ByteBuffer *buffer)
{
    // Below 64 KiB of values a copy costs less than the pieces sharing
    // needs (bench_roundtrip: 9 more allocations per 2-float step, each end).
    constexpr size_t kShareFromBytes = 64 * 1024;
    size_t totalValueBytes = 0;
    for (const proto::Tensor &tensor : *tensors)
        totalValueBytes += size_t(tensor.values_size()) * sizeof(float);
    if (totalValueBytes < kShareFromBytes)
        return serialize(message, buffer);
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
        google::protobuf::RepeatedField<float> values;
        values.Swap(tensor.mutable_values());
        std::string &tensorHead = tensorHeads[size_t(i)];
        tensor.AppendToString(&tensorHead);
        values.Swap(tensor.mutable_values());
        const size_t valueBytes = size_t(tensor.values_size()) * sizeof(float);
        // Protobuf writes no field for an empty packed list; nor does this.
        const size_t tensorLength
            = tensorHead.size() + (valueBytes > 0 ? lengthDelimitedSize(valuesField, valueBytes) : 0);
        pushLength += lengthDelimitedSize(tensorsField, tensorLength);
        std::string prefix;
        appendTag(&prefix, tensorsField);
        appendLength(&prefix, tensorLength);
        tensorHead.insert(0, prefix);
        if (valueBytes > 0) {
            appendTag(&tensorHead, valuesField);
            appendLength(&tensorHead, valueBytes);
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
    for (int i = 0; i < tensors->size(); ++i) {
        pending += tensorHeads[size_t(i)];
        const proto::Tensor &tensor = (*tensors)[i];
        if (tensor.values_size() == 0)
            continue;
        slices.emplace_back(pending);
        pending.clear();
        slices.emplace_back(tensor.values().data(), size_t(tensor.values_size()) * sizeof(float),
                            grpc::Slice::STATIC_SLICE);
    }
    if (!pending.empty())
        slices.emplace_back(pending);
    grpc::ByteBuffer shared(slices.data(), slices.size());
    buffer->Swap(&shared);
    return true;
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

bool serialize(const google::protobuf::MessageLite &message, grpc::ByteBuffer *buffer)
{
    bool ownBuffer = false;
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(message, buffer, &ownBuffer)
        .ok();
}

bool serializeSharingValues(proto::TrainRequest &request, grpc::ByteBuffer *buffer)
{
    if (!request.has_push())
        return serialize(request, buffer);
    proto::PushRequest *push = request.mutable_push();
    return serializeSharing(request, push, proto::TrainRequest::kPushFieldNumber, push->mutable_gradients(),
                            proto::PushRequest::kGradientsFieldNumber, buffer);
}

bool serializeSharingValues(proto::TrainResponse &response, grpc::ByteBuffer *buffer)
{
    if (!response.has_push())
        return serialize(response, buffer);
    proto::PushResponse *push = response.mutable_push();
    return serializeSharing(response, push, proto::TrainResponse::kPushFieldNumber, push->mutable_parameters(),
                            proto::PushResponse::kParametersFieldNumber, buffer);
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
    : m_stream(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
        &channel, grpc::internal::RpcMethod(trainMethodPath(), grpc::internal::RpcMethod::BIDI_STREAMING), &context))
{
}

bool TrainCall::write(const proto::TrainRequest &request)
{
    grpc::ByteBuffer out;
    return serialize(request, &out) && m_stream->Write(out);
}

bool TrainCall::writeSharingValues(proto::TrainRequest &request)
{
    grpc::ByteBuffer out;
    return serializeSharingValues(request, &out) && m_stream->Write(out);
}

bool TrainCall::read(proto::TrainResponse *response)
{
    return m_stream->Read(&m_in) && parseKeepingStorage(m_in, response);
}

bool TrainCall::writesDone()
{
    return m_stream->WritesDone();
}

grpc::Status TrainCall::finish()
{
    return m_stream->Finish();
}

} // namespace parasync
