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
#include "wire/data_link.h"
#include "wire/tensor_spans.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

// Parses `buffer` into `message` with ParseFromZeroCopyStream's result --
// the same fields, the same oneof case, refused where it refuses -- but
// when the message held a push and the buffer's last kind is a push too,
// into the old push's storage. Empties `buffer`.
bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainRequest *request);
bool parseKeepingStorage(grpc::ByteBuffer &buffer, proto::TrainResponse *response);
// The same for a message read from a data link's frame.
bool parseKeepingStorage(const std::string &bytes, proto::TrainRequest *request);
bool parseKeepingStorage(const std::string &bytes, proto::TrainResponse *response);

// The message's bytes as gRPC would send them, in place of what `buffer` held.
bool serialize(const google::protobuf::MessageLite &message, grpc::ByteBuffer *buffer);

// The same message, but the values of its push's parameter tensors are not
// copied: the buffer's slices point at the message's own storage. A packed
// `repeated float` is its values' little-endian bytes on the wire, so only
// the tags and lengths around them are written here; the bytes parse to the
// same message. The message is left as it was, and must stay unchanged
// until gRPC is done with the buffer -- for a Train stream, until the answer
// to it has been read. Below 64 KiB of values it is serialized as usual.
bool serializeSharingValues(proto::TrainResponse &response, grpc::ByteBuffer *buffer);
// A push whose gradient tensors carry their shapes but no values: tensor i's
// values are `gradients[i]` (the worker's own gradient vectors), sent from
// there, and the bytes parse to the push with those values in its tensors.
// The gradients must stay unchanged until the answer has been read. Below
// 64 KiB they are copied into the tensors and serialized as usual. False
// when the counts differ or a tensor holds values of its own.
bool serializeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, grpc::ByteBuffer *buffer);

// How a push answer's parameter values arrived (AnswerReader::read).
enum class ParameterDelivery {
    Delivered, // in the destinations; the tensors keep their shapes only
    InMessage, // in the message's tensors, as parseKeepingStorage leaves them
    Malformed, // the bytes are no TrainResponse
};

// Reads the answers of one Train stream. A worker copies an answer's
// parameters into its own vectors; parsed into the message first, 4 MB of
// them at 1M floats would be copied twice. This reader copies them once,
// from gRPC's slices to where they go. It keeps its scratch from answer to
// answer: no allocation per step.
class AnswerReader
{
public:
    // When `buffer` is a push answer whose parameters are
    // destinations.size() tensors, tensor i holding exactly
    // destinations[i].size() values in one packed run (how protobuf writes
    // them), the values go to destinations[i] and the rest of the answer
    // into `response`: Delivered. Any other answer is parsed as
    // parseKeepingStorage parses it (the destinations may then hold some of
    // its values): InMessage, or Malformed. Empties `buffer`.
    ParameterDelivery read(grpc::ByteBuffer &buffer, proto::TrainResponse *response,
                           const TensorDestinations &destinations);

private:
    // The answer but its parameters' values, into m_rest; false, with
    // destinations perhaps written, when it is not of the form above.
    bool deliver(grpc::ByteBuffer &buffer, const TensorDestinations &destinations);

    std::string m_tensor; // one tensor without its values
    std::string m_push;   // the push without its parameters' values
    std::string m_rest;   // the answer without them
};

// For a push or an answer whose values follow on the data link
// (values_on_data_link): sizes each tensor's values to what its shape holds
// and points `destinations` at them, the storage kept from step to step and
// not zeroed. False, with *error for the sender, when a tensor carries values
// of its own, has a negative dimension, or the tensors hold more than
// `maxValues` in all.
bool sizeForLinkedValues(google::protobuf::RepeatedPtrField<proto::Tensor> &tensors, int64_t maxValues,
                         TensorDestinations *destinations, std::string *error);

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
    // Cancels a stream whose requests went on its data link and that has
    // not ended yet.
    ~TrainCall();
    TrainCall(const TrainCall &) = delete;
    TrainCall &operator=(const TrainCall &) = delete;

    // As grpc::ClientReaderWriter's Write, Read, WritesDone and Finish.
    bool write(const proto::TrainRequest &request);
    // How a push's values go on a data link: on the calling thread before
    // writeSharingValues() returns, or Overlapped: what the socket does not
    // take at once goes on the link's I/O thread while the caller starts its
    // writes to other ps tasks.
    enum class LinkWrite { Here, Overlapped };
    // A push whose gradients go out from where they lie
    // (serializeSharingValues): leave them and the request unchanged until
    // the answer to it has been read.
    bool writeSharingValues(proto::TrainRequest &request, const TensorValues &gradients,
                            LinkWrite linkWrite = LinkWrite::Here);
    // Keeps the storage of `response`'s push for the next: pass the same
    // message every step. A push answer whose values come on the data link
    // has them in its tensors.
    bool read(proto::TrainResponse *response);
    // Reads the answer through AnswerReader: a push answer's parameters go
    // straight to `destinations` when it has their form, and *delivered
    // says whether they did (else they are in the message).
    bool read(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered);
    // The size of the last message read, in bytes on the wire.
    size_t lastReadBytes() const { return m_lastReadBytes; }
    bool writesDone();
    // The stream's status; when its data link broke, UNAVAILABLE saying how.
    grpc::Status finish();

    // After a join answer that grants a data link: connects it to `host`
    // (where the stream reached the ps) within `timeout`. From then on every
    // push's values, and its answer's, go on the link -- and when the grant
    // says `messages`, every request and answer, whole (data_link.h). False,
    // with *error, when it cannot be made: the stream carries everything as
    // before.
    bool openDataLink(DataLinkContext &context, const std::string &host, const proto::DataLinkGrant &grant,
                      std::chrono::milliseconds timeout, std::chrono::milliseconds stall, std::string *error);
    bool hasDataLink() const { return m_link != nullptr; }
    bool messagesOnDataLink() const { return m_messages; }
    // Waits until the values that writeSharingValues() put on the data link
    // have gone; false when the link broke.
    bool finishWrites();

private:
    // An answer flagged values_on_data_link: its values from the link, into
    // `destinations` when they fit, else into its tensors.
    bool readLinkedAnswer(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered);
    bool linkFailed(const std::string &what);
    // Sends `message` as a frame on the link, `values` after it.
    bool writeFrame(const google::protobuf::MessageLite &message, const TensorValues &values, LinkWrite linkWrite);
    // The next answer's frame into `response`, its values where they go.
    bool readFrame(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered);
    // With messages on the link nothing comes on the stream but its end; a
    // thread waits for it there (the ps's refusal, a lost connection that
    // gRPC's keepalive found, this worker's cancellation) and then shuts the
    // link down, so that a read waiting on it stops at once.
    void watchStreamEnd();

    grpc::ClientContext &m_context;
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> m_stream;
    grpc::ByteBuffer m_in;
    AnswerReader m_answers;
    size_t m_lastReadBytes = 0;
    std::unique_ptr<DataLink> m_link;
    std::string m_linkError;
    TensorDestinations m_scratch;
    bool m_messages = false; // requests and answers on the link
    std::string m_frameOut;  // kept from step to step: no allocation per frame
    std::string m_frameIn;
    std::thread m_streamWatch;
    std::mutex m_streamMutex;
    std::condition_variable m_streamEndedChanged;
    bool m_streamEnded = false;
};

} // namespace parasync
