#include "wire/train_call.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

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
