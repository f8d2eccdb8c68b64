// PsClient over gRPC: the stubs of ParameterService, TaskControl and
// Telemetry on one channel a process, and the Train stream as TrainCall.

#include "wire/ps_client.h"

#include "formats/shard_pieces.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/grpc_calls.h"
#include "wire/rpc.h"
#include "wire/train_call.h"

namespace parasync {

namespace {

class GrpcPsStream final : public PsStream
{
public:
    GrpcPsStream(grpc::ChannelInterface &channel, const RpcSettings &rpc)
        : m_context(makeContext(rpc))
        , m_call(std::make_unique<TrainCall>(channel, *m_context))
    {
    }
    // The call first: its destructor may still cancel through the context.
    ~GrpcPsStream() override { m_call.reset(); }

    bool write(const proto::TrainRequest &request) override { return m_call->write(request); }
    bool writeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, LinkWrite linkWrite) override
    {
        return m_call->writeSharingValues(request, gradients,
                                          linkWrite == LinkWrite::Overlapped ? TrainCall::LinkWrite::Overlapped
                                                                             : TrainCall::LinkWrite::Here);
    }
    bool read(proto::TrainResponse *response) override { return m_call->read(response); }
    bool read(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered) override
    {
        return m_call->read(response, destinations, delivered);
    }
    bool writesDone() override { return m_call->writesDone(); }
    void cancel() override { m_context->TryCancel(); }
    CallResult finish() override { return resultOf(m_call->finish()); }
    bool openDataLink(DataLinkContext &context, const std::string &host, const proto::DataLinkGrant &grant,
                      std::chrono::milliseconds timeout, std::chrono::milliseconds stall, std::string *error) override
    {
        return m_call->openDataLink(context, host, grant, timeout, stall, error);
    }
    bool hasDataLink() const override { return m_call->hasDataLink(); }
    bool messagesOnDataLink() const override { return m_call->messagesOnDataLink(); }

private:
    std::unique_ptr<grpc::ClientContext> m_context;
    std::unique_ptr<TrainCall> m_call;
};

class GrpcTelemetryStream final : public TelemetryStream
{
public:
    GrpcTelemetryStream(proto::Telemetry::Stub &stub, const RpcSettings &rpc, const proto::WatchRequest &request)
        : m_context(makeContext(rpc))
        , m_reader(stub.Watch(m_context.get(), request))
    {
    }
    ~GrpcTelemetryStream() override
    {
        if (!m_finished) {
            m_context->TryCancel();
            m_reader->Finish();
        }
    }

    bool read(proto::TelemetryBatch *batch) override { return m_reader->Read(batch); }
    void cancel() override { m_context->TryCancel(); }
    CallResult finish() override
    {
        m_finished = true;
        return resultOf(m_reader->Finish());
    }

private:
    std::unique_ptr<grpc::ClientContext> m_context;
    std::unique_ptr<grpc::ClientReader<proto::TelemetryBatch>> m_reader;
    bool m_finished = false;
};

class GrpcPsClient final : public PsClient
{
public:
    GrpcPsClient(std::vector<std::string> addresses, const RpcSettings &rpc)
        : m_addresses(std::move(addresses))
        , m_rpc(rpc)
    {
        for (const std::string &address : m_addresses) {
            m_channels.push_back(makeChannel(address, m_rpc));
            m_parameters.push_back(proto::ParameterService::NewStub(m_channels.back()));
            m_control.push_back(proto::TaskControl::NewStub(m_channels.back()));
            m_telemetry.push_back(proto::Telemetry::NewStub(m_channels.back()));
        }
    }

    const std::vector<std::string> &addresses() const override { return m_addresses; }

    CallResult taskStatus(size_t process, std::chrono::milliseconds deadline,
                          proto::TaskStatusResponse *response) override
    {
        const auto context = makeContext(m_rpc, deadline);
        return resultOf(m_control.at(process)->GetTaskStatus(context.get(), {}, response));
    }
    CallResult initialize(size_t process, const proto::InitializeRequest &request, std::chrono::milliseconds deadline,
                          proto::InitializeResponse *response) override
    {
        const auto context = makeContext(m_rpc, deadline);
        // One message when it fits: what every ps task has served since the
        // first release, and all a dense model ever needs.
        if (!shardNeedsPieces(request.shard(), m_rpc.maxMessageBytes))
            return resultOf(m_parameters.at(process)->Initialize(context.get(), request, response));
        proto::InitializeRequest head = request;
        TableStates rows;
        takeTableRows(head.mutable_shard()->mutable_tables(), &rows);
        const auto writer = m_parameters.at(process)->InitializeInPieces(context.get(), response);
        proto::InitializeRequest piece;
        if (writer->Write(head))
            forEachRowPiece(rows, pieceBytesWithin(m_rpc.maxMessageBytes), [&](proto::TableState &table) {
                piece.mutable_shard()->mutable_tables()->Clear();
                piece.mutable_shard()->add_tables()->Swap(&table);
                return writer->Write(piece);
            });
        // A write that failed ends the call; Finish says why.
        writer->WritesDone();
        return resultOf(writer->Finish());
    }
    CallResult snapshot(size_t process, std::chrono::milliseconds deadline, proto::SnapshotResponse *response) override
    {
        const auto context = makeContext(m_rpc, deadline);
        const auto reader = m_parameters.at(process)->ReadShard(context.get(), {});
        bool first = true;
        std::string wrong;
        proto::SnapshotResponse piece;
        while (reader->Read(&piece)) {
            if (first) {
                response->Swap(&piece);
                first = false;
            } else if (wrong.empty()) {
                wrong = piece.shard().tables_size() != 1
                            ? "a ReadShard piece with " + std::to_string(piece.shard().tables_size()) + " tables"
                            : addRowPiece(response->mutable_shard()->mutable_tables(),
                                          std::move(*piece.mutable_shard()->mutable_tables(0)));
                if (!wrong.empty())
                    context->TryCancel();
            }
        }
        const grpc::Status status = reader->Finish();
        if (!wrong.empty())
            return {CallResult::Code::Other, wrong, "ps task's snapshot came in pieces that do not fit: " + wrong};
        if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
            // A ps task of a parasync-node before ReadShard: one message.
            const auto unary = makeContext(m_rpc, deadline);
            return resultOf(m_parameters.at(process)->Snapshot(unary.get(), {}, response));
        }
        return resultOf(status);
    }
    CallResult reportCheckpoint(size_t process, const proto::ReportCheckpointRequest &request,
                                std::chrono::milliseconds deadline) override
    {
        const auto context = makeContext(m_rpc, deadline);
        proto::ReportCheckpointResponse ignored;
        return resultOf(m_telemetry.at(process)->ReportCheckpoint(context.get(), request, &ignored));
    }
    std::unique_ptr<PsStream> openStream(size_t process) override
    {
        return std::make_unique<GrpcPsStream>(*m_channels.at(process), m_rpc);
    }
    std::unique_ptr<TelemetryStream> watchTelemetry(size_t process, const proto::WatchRequest &request) override
    {
        return openTelemetryStream(*m_telemetry.at(process), m_rpc, request);
    }

private:
    std::vector<std::string> m_addresses;
    RpcSettings m_rpc;
    std::vector<std::shared_ptr<grpc::Channel>> m_channels;
    std::vector<std::unique_ptr<proto::ParameterService::Stub>> m_parameters;
    std::vector<std::unique_ptr<proto::TaskControl::Stub>> m_control;
    std::vector<std::unique_ptr<proto::Telemetry::Stub>> m_telemetry;
};

} // namespace

CallResult resultOf(const grpc::Status &status)
{
    CallResult result;
    switch (status.error_code()) {
    case grpc::StatusCode::OK: return result;
    case grpc::StatusCode::CANCELLED: result.code = CallResult::Code::Cancelled; break;
    case grpc::StatusCode::UNAVAILABLE: result.code = CallResult::Code::Unavailable; break;
    case grpc::StatusCode::INVALID_ARGUMENT: result.code = CallResult::Code::InvalidArgument; break;
    case grpc::StatusCode::FAILED_PRECONDITION: result.code = CallResult::Code::FailedPrecondition; break;
    case grpc::StatusCode::ALREADY_EXISTS: result.code = CallResult::Code::AlreadyExists; break;
    case grpc::StatusCode::ABORTED: result.code = CallResult::Code::Aborted; break;
    case grpc::StatusCode::DEADLINE_EXCEEDED: result.code = CallResult::Code::DeadlineExceeded; break;
    case grpc::StatusCode::UNIMPLEMENTED: result.code = CallResult::Code::Unimplemented; break;
    case grpc::StatusCode::UNAUTHENTICATED: result.code = CallResult::Code::Unauthenticated; break;
    default: result.code = CallResult::Code::Other; break;
    }
    result.message = status.error_message();
    result.description = describeRpcError(status);
    return result;
}

std::unique_ptr<TelemetryStream> openTelemetryStream(proto::Telemetry::Stub &stub, const RpcSettings &rpc,
                                                     const proto::WatchRequest &request)
{
    return std::make_unique<GrpcTelemetryStream>(stub, rpc, request);
}

std::unique_ptr<PsClient> makeGrpcPsClient(std::vector<std::string> addresses, const RpcSettings &rpc)
{
    return std::make_unique<GrpcPsClient>(std::move(addresses), rpc);
}

} // namespace parasync
