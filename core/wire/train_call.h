#pragma once

// ParameterService.Train, the stream a step travels on, with its messages
// parsed into the storage of the ones before them.
//
// Protobuf parses a message by clearing it first, and clearing a oneof
// deletes the message it holds. A push of 1,000,000 floats then grows its
// values field from nothing by doubling: ~4 MB copied beyond the parse
// itself and about seven buffers of up to 4 MB allocated per step, on the ps
// for the gradient and on the worker for the parameters (perf: as much time
// as the parse's own copy). Both ends of Train therefore carry gRPC
// ByteBuffers and parse each into the message that held the previous one,
// so a push's tensors keep their capacity from step to step. The bytes on
// the wire are the .proto's; any client of ParameterService still works.

#include "proto/parasync.pb.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <memory>
#include <string>

namespace parasync {

// Parses `buffer` into `message` with ParseFromZeroCopyStream's result --
// the same fields, the same oneof case, refused where it refuses -- but
// when the message held a push and the buffer's last kind is a push too,
// into the old push's storage. Empties `buffer`.
bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainRequest *request);
bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainResponse *response);

// The message's bytes as gRPC would send them.
bool serialize(const google::protobuf::MessageLite &message, grpc::ByteBuffer *buffer);

// The same message, but the values of its push's tensors (a request's
// gradients, a response's parameters) are not copied: the buffer's slices
// point at the message's own storage. A packed `repeated float` is its
// values' little-endian bytes on the wire, so only the tags and lengths
// around them are written here; the bytes parse to the same message. The
// message is left as it was, and must stay unchanged until gRPC is done with
// the buffer -- for a Train stream, until the answer to it has been read.
bool serializeSharingValues(proto::TrainRequest &request, grpc::ByteBuffer *buffer);
bool serializeSharingValues(proto::TrainResponse &response, grpc::ByteBuffer *buffer);

// "/parasync.proto.ParameterService/Train", and Train's place among the
// service's methods (what grpc::Service numbers its handlers by).
const char *trainMethodPath();
int trainMethodIndex();

// The worker's end of a Train stream.
class TrainCall
{
public:
    // `context` must outlive the call.
    TrainCall(grpc::ChannelInterface &channel, grpc::ClientContext &context);
    TrainCall(const TrainCall &) = delete;
    TrainCall &operator=(const TrainCall &) = delete;

    // As grpc::ClientReaderWriter's Write, Read, WritesDone and Finish.
    bool write(const proto::TrainRequest &request);
    // A push whose gradients go out from the request's own storage
    // (serializeSharingValues): leave the request unchanged until the
    // answer to it has been read.
    bool writeSharingValues(proto::TrainRequest &request);
    // Keeps the storage of `response`'s push for the next: pass the same
    // message every step.
    bool read(proto::TrainResponse *response);
    bool writesDone();
    grpc::Status finish();

private:
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> m_stream;
    grpc::ByteBuffer m_in;
};

} // namespace parasync
