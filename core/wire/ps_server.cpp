#include "wire/ps_server.h"

#include "formats/shard_pieces.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/cluster_token.h"
#include "wire/connect_probe.h"
#include "wire/data_link.h"
#include "wire/lease_service.h"
#include "wire/rpc.h"
#include "wire/task_server.h"
#include "wire/token_check.h"
#include "wire/train_call.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <set>

namespace parasync {

namespace {

grpc::Status toGrpc(const CallStatus &status)
{
    switch (status.code()) {
    case CallStatus::Code::Ok: return grpc::Status::OK;
    case CallStatus::Code::InvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case CallStatus::Code::FailedPrecondition: return {grpc::StatusCode::FAILED_PRECONDITION, status.message()};
    case CallStatus::Code::AlreadyExists: return {grpc::StatusCode::ALREADY_EXISTS, status.message()};
    case CallStatus::Code::RetryLater: return {grpc::StatusCode::ABORTED, status.message()};
    case CallStatus::Code::Unavailable: return {grpc::StatusCode::UNAVAILABLE, status.message()};
    }
    return {grpc::StatusCode::INTERNAL, status.message()};
}

// The ps's end of a Train stream: ByteBuffers parsed into the request that
// PsHandler::train keeps for the stream's life (wire/train_call.h says why).
// When the worker offers a data link and the ps has an acceptor, the join's
// answer grants one, and the values of pushes flagged values_on_data_link
// (and of their answers) travel on it (wire/data_link.h); the task sees the
// same messages either way.
class GrpcTrainStream final : public TrainStream
{
public:
    GrpcTrainStream(grpc::ServerContext &context, grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> &stream,
                    DataLinkAcceptor *acceptor, int maxMessageBytes)
        : m_context(context)
        , m_stream(stream)
        , m_acceptor(acceptor)
        , m_maxBytes(size_t(maxMessageBytes))
        , m_maxValues(maxMessageBytes / int64_t(sizeof(float)))
    {
    }
    ~GrpcTrainStream() override
    {
        if (m_acceptor && !m_nonce.empty())
            m_acceptor->revoke(m_nonce);
    }
    bool read(proto::TrainRequest *request) override
    {
        if (m_messagesGranted && !m_link) {
            // The worker connects its link before it sends anything more. If
            // it could not, the ps's claim spent the nonce: a late greeting is
            // refused, and the worker goes on on the stream.
            claimLink();
            m_messagesGranted = false;
            m_onLink = m_link != nullptr;
        }
        if (m_onLink) {
            if (!readFrame(request))
                return false;
        } else {
            if (!m_stream.Read(&m_in))
                return false;
            if (!parseKeepingStorage(m_in, request))
                return refuse({grpc::StatusCode::INVALID_ARGUMENT,
                               "a Train request was not a parasync.proto.TrainRequest (it does not parse): "
                               "speak ParameterService as core/proto/parasync.proto defines it"});
        }
        if (request->has_join()) {
            m_offered = request->join().offers_data_link();
            m_messagesOffered = m_offered && request->join().offers_messages_on_data_link();
        }
        m_linkedPush = request->has_push() && request->push().values_on_data_link();
        return !m_linkedPush || readLinkedValues(request->mutable_push());
    }
    bool gone() const override { return m_context.IsCancelled(); }
    bool write(proto::TrainResponse &response, const TensorValues &parameters) override
    {
        if (response.has_join() && response.join().ready() && m_offered && m_acceptor && !m_link && m_nonce.empty()) {
            const DataLinkGrant grant = m_acceptor->grant();
            m_nonce = grant.nonce;
            response.mutable_join()->mutable_data_link()->set_port(grant.port);
            response.mutable_join()->mutable_data_link()->set_nonce(grant.nonce);
            response.mutable_join()->mutable_data_link()->set_messages(m_messagesOffered);
            m_messagesGranted = m_messagesOffered;
        }
        // An answer's values go on the link when its push's came that way,
        // from the shard's memory; otherwise in the message, copied there
        // now that the ps's lock is let go.
        const bool linked = !parameters.empty() && m_linkedPush;
        if (linked)
            response.mutable_push()->set_values_on_data_link(true);
        else if (!parameters.empty())
            copyTensorValues(parameters, response.mutable_push()->mutable_parameters());
        if (m_onLink)
            return writeFrame(response, linked ? parameters : TensorValues{});
        grpc::ByteBuffer out;
        if (!linked) {
            // The parameters go out from the response's own storage: the task
            // refills it only after the next read, and the worker sends that
            // request only once it has this whole answer.
            return serializeSharingValues(response, &out) && m_stream.Write(out);
        }
        // The stream carries the rest.
        return serialize(response, &out) && m_stream.Write(out) && (m_link->write(parameters) || refuse(linkBroke()));
    }
    // Why the stream ended on the ps's side (bytes that are no TrainRequest,
    // a data link misused or broken); OK when the worker ended it.
    const grpc::Status &refusal() const { return m_refusal; }

private:
    bool refuse(grpc::Status status)
    {
        m_refusal = std::move(status);
        return false;
    }
    grpc::Status linkBroke() const
    {
        return {grpc::StatusCode::UNAVAILABLE, m_link->error() + "; join again to make a new link"};
    }
    void claimLink()
    {
        if (!m_link && m_acceptor && !m_nonce.empty()) {
            // The worker connects, and the ps accepts, before its next
            // request; the acceptor's thread may still be storing the link.
            m_link = m_acceptor->claim(m_nonce, std::chrono::seconds(2));
            m_nonce.clear();
        }
    }
    // The next request, from a frame on the link. False when the stream is
    // over: the worker closed its link (as a stream's end without a goodbye)
    // or the stream was cancelled, or the frame was refused.
    bool readFrame(proto::TrainRequest *request)
    {
        switch (m_link->readFrame(&m_frame, m_maxBytes, [this] { return !m_context.IsCancelled(); })) {
        case DataLink::FrameRead::Read: break;
        case DataLink::FrameRead::Closed:
        case DataLink::FrameRead::Abandoned: return false;
        case DataLink::FrameRead::TooLarge:
            return refuse({grpc::StatusCode::INVALID_ARGUMENT,
                           m_link->error() + ": send values_on_data_link for large tensors, or raise the ps's limit"});
        case DataLink::FrameRead::Failed: return refuse(linkBroke());
        }
        if (!parseKeepingStorage(m_frame, request))
            return refuse({grpc::StatusCode::INVALID_ARGUMENT,
                           "a frame on the data link was not a parasync.proto.TrainRequest (it does not parse): "
                           "frame each request as DataLinkGrant in core/proto/parasync.proto says"});
        return true;
    }
    // An answer as a frame on the link, `values` after it.
    bool writeFrame(const proto::TrainResponse &response, const TensorValues &values)
    {
        DataLink::startFrame(&m_frameOut);
        if (!response.AppendToString(&m_frameOut))
            return false;
        return m_link->writeFrame(m_frameOut, values, false) || refuse(linkBroke());
    }
    // A push flagged values_on_data_link: its gradients' values from the
    // link, into the tensors' kept storage.
    bool readLinkedValues(proto::PushRequest *push)
    {
        claimLink();
        if (!m_link)
            return refuse({grpc::StatusCode::INVALID_ARGUMENT,
                           "a push set values_on_data_link on a stream without a data link: offer one in the "
                           "JoinRequest (offers_data_link) and connect it as JoinResponse.data_link says, or send "
                           "the values in the message"});
        std::string error;
        if (!sizeForLinkedValues(*push->mutable_gradients(), m_maxValues, &m_gradient, &error))
            return refuse({grpc::StatusCode::INVALID_ARGUMENT, "a push's values on the data link: " + error});
        return m_link->read(m_gradient) || refuse(linkBroke());
    }

    grpc::ServerContext &m_context;
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> &m_stream;
    grpc::ByteBuffer m_in;
    grpc::Status m_refusal;
    DataLinkAcceptor *m_acceptor;
    const size_t m_maxBytes;
    const int64_t m_maxValues;
    bool m_offered = false;
    bool m_messagesOffered = false;
    bool m_messagesGranted = false; // granted, the link not claimed yet
    bool m_onLink = false;          // requests and answers come and go as frames
    std::string m_frame;            // kept from step to step, as m_in
    std::string m_frameOut;
    std::string m_nonce; // granted, not yet claimed
    std::unique_ptr<DataLink> m_link;
    bool m_linkedPush = false; // the push being answered came on the link
    TensorDestinations m_gradient;
};

class GrpcWatchStream final : public WatchStream
{
public:
    GrpcWatchStream(grpc::ServerContext &context, grpc::ServerWriter<proto::TelemetryBatch> &writer)
        : m_context(context)
        , m_writer(writer)
    {
    }
    // A cancelled watcher gets nothing more, not even the batch at hand.
    bool write(const proto::TelemetryBatch &batch) override
    {
        return !m_context.IsCancelled() && m_writer.Write(batch);
    }

private:
    grpc::ServerContext &m_context;
    grpc::ServerWriter<proto::TelemetryBatch> &m_writer;
};

class ParameterServiceImpl final : public proto::ParameterService::Service
{
public:
    ParameterServiceImpl(PsHandler &task, const TokenCheck &auth, DataLinkAcceptor *links, int maxMessageBytes)
        : m_task(task)
        , m_auth(auth)
        , m_links(links)
        , m_maxMessageBytes(maxMessageBytes)
    {
        // Train is served on ByteBuffers, parsed by GrpcTrainStream into
        // storage kept from step to step; the generated handler would parse
        // every request into a fresh message.
        MarkMethodStreamed(
            trainMethodIndex(),
            new grpc::internal::BidiStreamingHandler<ParameterServiceImpl, grpc::ByteBuffer, grpc::ByteBuffer>(
                [](ParameterServiceImpl *service, grpc::ServerContext *context,
                   grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> *stream) {
                    return service->train(context, stream);
                },
                this));
    }
    grpc::Status Initialize(grpc::ServerContext *context, const proto::InitializeRequest *request,
                            proto::InitializeResponse *response) override
    {
        if (auto denied = m_auth.check(*context, "Initialize"); !denied.ok())
            return denied;
        return toGrpc(m_task.initialize(*request, response));
    }
    grpc::Status Snapshot(grpc::ServerContext *context, const proto::SnapshotRequest *,
                          proto::SnapshotResponse *response) override
    {
        if (auto denied = m_auth.check(*context, "Snapshot"); !denied.ok())
            return denied;
        return toGrpc(m_task.snapshot(response));
    }
    grpc::Status ReadShard(grpc::ServerContext *context, const proto::SnapshotRequest *,
                           grpc::ServerWriter<proto::SnapshotResponse> *writer) override
    {
        if (auto denied = m_auth.check(*context, "ReadShard"); !denied.ok())
            return denied;
        proto::SnapshotResponse head;
        if (const CallStatus status = m_task.snapshot(&head); !status.ok())
            return toGrpc(status);
        TableStates rows;
        takeTableRows(head.mutable_shard()->mutable_tables(), &rows);
        if (!writer->Write(head))
            return readerGone();
        proto::SnapshotResponse piece;
        const bool sent = forEachRowPiece(rows, pieceBytesWithin(m_maxMessageBytes), [&](proto::TableState &table) {
            piece.mutable_shard()->mutable_tables()->Clear();
            piece.mutable_shard()->add_tables()->Swap(&table);
            return writer->Write(piece);
        });
        return sent ? grpc::Status::OK : readerGone();
    }
    grpc::Status InitializeInPieces(grpc::ServerContext *context, grpc::ServerReader<proto::InitializeRequest> *reader,
                                    proto::InitializeResponse *response) override
    {
        if (auto denied = m_auth.check(*context, "InitializeInPieces"); !denied.ok())
            return denied;
        proto::InitializeRequest whole;
        if (!reader->Read(&whole))
            return {grpc::StatusCode::INVALID_ARGUMENT,
                    "InitializeInPieces without a first message: send Initialize's request, its tables' rows left "
                    "out, then the rows"};
        proto::InitializeRequest piece;
        while (reader->Read(&piece)) {
            const bool oneTable = piece.shard().tables_size() == 1 && piece.shard().variables_size() == 0
                                  && !piece.has_signature() && piece.global_step() == 0 && piece.origin().empty();
            if (!oneTable)
                return {grpc::StatusCode::INVALID_ARGUMENT,
                        "an InitializeInPieces message after the first carries "
                            + std::to_string(piece.shard().tables_size()) + " tables and "
                            + std::to_string(piece.shard().variables_size())
                            + " variables: send one TableState of rows (shard.tables) and nothing else in each later "
                              "message"};
            if (std::string wrong = addRowPiece(whole.mutable_shard()->mutable_tables(),
                                                std::move(*piece.mutable_shard()->mutable_tables(0)));
                !wrong.empty())
                return {grpc::StatusCode::INVALID_ARGUMENT, "InitializeInPieces: " + wrong};
        }
        // A client that died half-way is a cancelled call, not an end: the
        // task is not initialised from half its rows.
        if (context->IsCancelled())
            return {grpc::StatusCode::CANCELLED, "InitializeInPieces broke off before its last piece"};
        return toGrpc(m_task.initialize(whole, response));
    }

private:
    static grpc::Status readerGone()
    {
        return {grpc::StatusCode::CANCELLED, "the reader went away before the last piece"};
    }
    grpc::Status train(grpc::ServerContext *context,
                       grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> *stream)
    {
        if (auto denied = m_auth.check(*context, "Train"); !denied.ok())
            return denied;
        GrpcTrainStream trainStream(*context, *stream, m_links, m_maxMessageBytes);
        const grpc::Status status = toGrpc(m_task.train(trainStream));
        if (status.ok() && !trainStream.refusal().ok())
            return trainStream.refusal();
        return status;
    }

    PsHandler &m_task;
    const TokenCheck &m_auth;
    DataLinkAcceptor *m_links; // null: no data links granted
    const int m_maxMessageBytes;
};

// The shard a replication record carries whole (its state, or the chief's
// initialisation), if any.
proto::ShardState *shardOf(proto::ReplicaRecord *record)
{
    if (record->has_state())
        return record->mutable_state()->mutable_shard();
    if (record->has_initialize())
        return record->mutable_initialize()->mutable_shard();
    return nullptr;
}

class GrpcFollowStream final : public FollowStream
{
public:
    GrpcFollowStream(grpc::ServerContext &context,
                     grpc::ServerReaderWriter<proto::ReplicaRecord, proto::FollowRequest> &stream, int maxMessageBytes)
        : m_context(context)
        , m_stream(stream)
        , m_maxMessageBytes(maxMessageBytes)
    {
    }
    bool read(proto::FollowRequest *request) override { return m_stream.Read(request); }
    bool write(const proto::ReplicaRecord &record, bool more) override
    {
        const bool whole
            = !(record.has_state() || record.has_initialize())
              || !shardNeedsPieces(record.has_state() ? record.state().shard() : record.initialize().shard(),
                                   m_maxMessageBytes);
        if (whole)
            return writeOne(record, more);
        // A shard past --max_message_bytes: the record without its tables'
        // rows, then the rows in `shard_rows` records (GrpcPrimaryLink joins them).
        proto::ReplicaRecord head = record;
        TableStates rows;
        takeTableRows(shardOf(&head)->mutable_tables(), &rows);
        int64_t left = rowPieceCount(rows, pieceBytesWithin(m_maxMessageBytes));
        head.set_pieces_following(int32_t(left));
        if (!writeOne(head, true))
            return false;
        proto::ReplicaRecord piece;
        return forEachRowPiece(rows, pieceBytesWithin(m_maxMessageBytes), [&](proto::TableState &table) {
            piece.mutable_shard_rows()->Swap(&table);
            return writeOne(piece, --left > 0 || more);
        });
    }
    void cancel() override { m_context.TryCancel(); }

private:
    bool writeOne(const proto::ReplicaRecord &record, bool more)
    {
        grpc::WriteOptions options;
        if (more)
            options.set_buffer_hint();
        return m_stream.Write(record, options);
    }

    grpc::ServerContext &m_context;
    grpc::ServerReaderWriter<proto::ReplicaRecord, proto::FollowRequest> &m_stream;
    const int m_maxMessageBytes;
};

class PsReplicationImpl final : public proto::PsReplication::Service
{
public:
    PsReplicationImpl(PsHandler &task, const TokenCheck &auth, int maxMessageBytes)
        : m_task(task)
        , m_auth(auth)
        , m_maxMessageBytes(maxMessageBytes)
    {
    }
    grpc::Status Follow(grpc::ServerContext *context,
                        grpc::ServerReaderWriter<proto::ReplicaRecord, proto::FollowRequest> *stream) override
    {
        if (auto denied = m_auth.check(*context, "Follow"); !denied.ok())
            return denied;
        GrpcFollowStream follow(*context, *stream, m_maxMessageBytes);
        return toGrpc(m_task.follow(follow));
    }

private:
    PsHandler &m_task;
    const TokenCheck &m_auth;
    const int m_maxMessageBytes;
};

// The backup's call to its primary's Follow.
class GrpcPrimaryLink final : public PrimaryLink
{
public:
    GrpcPrimaryLink(const std::string &address, const RpcSettings &rpc)
        : m_stub(proto::PsReplication::NewStub(makeChannel(address, rpc)))
        , m_context(makeContext(rpc))
        , m_stream(m_stub->Follow(m_context.get()))
    {
    }
    bool write(const proto::FollowRequest &request) override { return m_stream->Write(request); }
    bool read(proto::ReplicaRecord *record) override
    {
        const bool ok = m_stream->Read(record);
        m_receivedAny = m_receivedAny || ok;
        if (!ok || record->pieces_following() == 0)
            return ok;
        // A shard past --max_message_bytes: its rows follow, joined here so
        // that the task applies the record whole.
        proto::ShardState *shard = shardOf(record);
        if (!shard)
            return refuse("pieces_following on a record that carries no shard");
        proto::ReplicaRecord piece;
        for (int32_t i = 0; i < record->pieces_following(); ++i) {
            if (!m_stream->Read(&piece))
                return false;
            if (!piece.has_shard_rows())
                return refuse("a record where the rows of the shard before it were due");
            if (std::string wrong = addRowPiece(shard->mutable_tables(), std::move(*piece.mutable_shard_rows()));
                !wrong.empty())
                return refuse(wrong);
        }
        record->set_pieces_following(0);
        return true;
    }
    void cancel() override { m_context->TryCancel(); }
    std::string finish() override
    {
        const grpc::Status status = m_stream->Finish();
        if (!m_wrong.empty())
            return "the primary's shard came in pieces that do not fit together: " + m_wrong;
        // Once records came, the connection was up: reading the error as a
        // failed set-up (TLS? another program?) would mislead.
        if (m_receivedAny
            && (status.error_code() == grpc::StatusCode::UNAVAILABLE
                || status.error_code() == grpc::StatusCode::CANCELLED))
            return "the replication stream broke (" + status.error_message() + ")";
        return describeRpcError(status);
    }

private:
    std::unique_ptr<proto::PsReplication::Stub> m_stub;
    std::unique_ptr<grpc::ClientContext> m_context;
    bool refuse(std::string wrong)
    {
        m_wrong = std::move(wrong);
        m_context->TryCancel();
        return false;
    }

    std::unique_ptr<grpc::ClientReaderWriter<proto::FollowRequest, proto::ReplicaRecord>> m_stream;
    bool m_receivedAny = false;
    std::string m_wrong; // what was wrong with the pieces of a shard
};

class ClusterControlImpl final : public proto::ClusterControl::Service
{
public:
    ClusterControlImpl(PsHandler &task, const TokenCheck &auth) : m_task(task), m_auth(auth) {}
    grpc::Status SetMode(grpc::ServerContext *context, const proto::SetModeRequest *request,
                         proto::SetModeResponse *response) override
    {
        if (auto denied = m_auth.check(*context, "SetMode"); !denied.ok())
            return denied;
        return toGrpc(m_task.setMode(*request, response));
    }
    grpc::Status GetClusterStatus(grpc::ServerContext *context, const proto::ClusterStatusRequest *,
                                  proto::ClusterStatusResponse *response) override
    {
        if (auto denied = m_auth.check(*context, "GetClusterStatus"); !denied.ok())
            return denied;
        *response = m_task.clusterStatus();
        return grpc::Status::OK;
    }

private:
    PsHandler &m_task;
    const TokenCheck &m_auth;
};

class TelemetryImpl final : public proto::Telemetry::Service
{
public:
    TelemetryImpl(PsHandler &task, const TokenCheck &auth) : m_task(task), m_auth(auth) {}
    grpc::Status Watch(grpc::ServerContext *context, const proto::WatchRequest *request,
                       grpc::ServerWriter<proto::TelemetryBatch> *writer) override
    {
        if (auto denied = m_auth.check(*context, "Watch"); !denied.ok())
            return denied;
        GrpcWatchStream watch(*context, *writer);
        return toGrpc(m_task.watch(*request, watch));
    }
    grpc::Status ReportCheckpoint(grpc::ServerContext *context, const proto::ReportCheckpointRequest *request,
                                  proto::ReportCheckpointResponse *) override
    {
        if (auto denied = m_auth.check(*context, "ReportCheckpoint"); !denied.ok())
            return denied;
        m_task.reportCheckpoint(*request);
        return grpc::Status::OK;
    }

private:
    PsHandler &m_task;
    const TokenCheck &m_auth;
};

} // namespace

namespace {

// Every port a task of the cluster serves on, whatever its host: a ps's data
// link takes none of them (two hosts' names may be one machine).
std::set<int> clusterPorts(const ClusterSpec &cluster)
{
    std::set<int> ports;
    for (const auto *list : {&cluster.ps, &cluster.psBackups, &cluster.workers})
        for (const HostPort &address : *list)
            ports.insert(address.port);
    return ports;
}

} // namespace

PsServer::PsServer(PsHandler &task, const NodeOptions &options, const RpcSettings &rpc, Log log)
{
    m_auth = std::make_unique<TokenCheck>(rpc.clusterToken, std::move(log));
    // Data links are plain TCP: under TLS the values stay on the encrypted
    // stream. A link that moves no byte for two heartbeats is taken for
    // broken, as gRPC takes a connection whose pings go unanswered.
    if (options.connection.dataLink && !rpc.tls.enabled())
        m_dataLinks = std::make_unique<DataLinkAcceptor>(
            options.cluster.address(options.task).host,
            std::max(std::chrono::milliseconds(2 * rpc.heartbeatMs), std::chrono::milliseconds(2000)),
            clusterPorts(options.cluster));
    m_services.push_back(std::make_unique<ParameterServiceImpl>(task, *m_auth, m_dataLinks.get(), rpc.maxMessageBytes));
    if (options.cluster.replicated()) {
        m_services.push_back(std::make_unique<PsReplicationImpl>(task, *m_auth, rpc.maxMessageBytes));
        m_services.push_back(std::make_unique<PsLeaseService>(
            [&task](const proto::VoteRequest &request, proto::VoteResponse *response) {
                return task.vote(request, response);
            },
            m_auth.get()));
    }
    if (options.task.index == 0) {
        m_services.push_back(std::make_unique<ClusterControlImpl>(task, *m_auth));
        m_services.push_back(std::make_unique<TelemetryImpl>(task, *m_auth));
    }
    TaskControlService::Callbacks callbacks;
    callbacks.status = [&task] { return task.taskStatus(); };
    callbacks.stop = [&task](const std::string &reason) { task.requestStop(reason); };
    m_services.push_back(std::make_unique<TaskControlService>(std::move(callbacks), m_auth.get()));

    std::vector<grpc::Service *> services;
    for (auto &s : m_services)
        services.push_back(s.get());
    m_server = startTaskServer(options.task, options.cluster.address(options.task), rpc, services);
}

PsServer::~PsServer()
{
    if (m_server)
        m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

int PsServer::dataLinkPort() const
{
    return m_dataLinks ? m_dataLinks->port() : 0;
}

void PsServer::shutdown(std::chrono::milliseconds grace)
{
    if (!m_server)
        return;
    m_server->Shutdown(std::chrono::system_clock::now() + grace);
    m_server->Wait();
    m_server.reset();
}

namespace {

std::unique_ptr<PrimaryLink> openPrimaryLink(const std::string &address, const RpcSettings &rpc)
{
    return std::make_unique<GrpcPrimaryLink>(address, rpc);
}

PeerStatus askPeer(const std::string &address, const RpcSettings &rpc, std::chrono::milliseconds timeout)
{
    // The question has its own deadline. Keepalive pings would only cut it
    // short: a loaded peer slow to answer a ping may still answer the call.
    RpcSettings patient = rpc;
    patient.heartbeatMs = std::max(rpc.heartbeatMs, int(timeout.count()));
    auto stub = proto::TaskControl::NewStub(makeChannel(address, patient));
    auto context = makeContext(rpc, timeout);
    proto::TaskStatusResponse status;
    const grpc::Status result = stub->GetTaskStatus(context.get(), {}, &status);
    PeerStatus peer;
    peer.reached = result.ok();
    if (peer.reached) {
        peer.role = status.replica_role();
        peer.holdsState = status.replica_holds_state();
    } else {
        peer.error = describeRpcError(result);
        // gRPC says UNAVAILABLE both for a refused connection and for one it
        // closed itself: a keepalive the loaded peer did not answer in time,
        // or the peer's GOAWAY. Only the first says nobody is there; a peer
        // that accepts a connection is alive, however slow, and may be the
        // pair's primary.
        if (result.error_code() == grpc::StatusCode::UNAVAILABLE) {
            peer.absent = !canConnect(parseHostPort(address), int(timeout.count()), nullptr);
            if (!peer.absent)
                peer.error += "; it accepts connections";
        }
    }
    return peer;
}

void stopOtherPsTasks(const ClusterSpec &cluster, const std::string &own, const RpcSettings &rpc,
                      const PsServer::Log &log)
{
    for (int i = 0; i < cluster.numPs(); ++i) {
        // Both processes of a replicated pair; ps:0's backup too.
        for (const HostPort &task : cluster.psPair(i)) {
            const auto address = task.toString();
            if (address == own)
                continue;
            auto stub = proto::TaskControl::NewStub(makeChannel(address, rpc));
            auto context = makeContext(rpc, std::chrono::seconds(2));
            proto::StopRequest request;
            request.set_reason("the cluster finished (told by ps:0)");
            proto::StopResponse response;
            const auto status = stub->Stop(context.get(), request, &response);
            if (!status.ok())
                log("could not tell ps:" + std::to_string(i) + " at " + address
                    + " to stop: " + describeRpcError(status));
        }
    }
}

} // namespace

PsTransport grpcPsTransport(const NodeOptions &options, const RpcSettings &rpc, PsServer::Log log)
{
    PsTransport transport;
    transport.serve = [options, rpc, log](PsHandler &task) -> std::unique_ptr<PsServing> {
        return std::make_unique<PsServer>(task, options, rpc, log);
    };
    transport.followPrimary = [rpc](const std::string &address) { return openPrimaryLink(address, rpc); };
    transport.askPeer = [rpc](const std::string &address, std::chrono::milliseconds timeout) {
        return askPeer(address, rpc, timeout);
    };
    transport.stopOtherPsTasks
        = [cluster = options.cluster, rpc, log](const std::string &own) { stopOtherPsTasks(cluster, own, rpc, log); };
    transport.askVote = [voters = std::make_shared<LeaseVoters>(rpc)](
                            const std::string &address, const proto::VoteRequest &request,
                            std::chrono::milliseconds timeout) { return voters->ask(address, request, timeout); };
    return transport;
}

} // namespace parasync
