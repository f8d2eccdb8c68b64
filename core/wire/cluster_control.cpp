#include "wire/cluster_control.h"

#include "base/error.h"
#include "config/control_command.h"
#include "wire/cluster_token.h"

#include "proto/parasync.grpc.pb.h"

#include <cstdio>

namespace parasync {

namespace {

// A control call's whole budget. A loaded ps (a busy step loop, a machine
// shared with other jobs) may take seconds to accept a connection, and may
// close a starved client's connection more than once. Both control calls are
// safe to repeat (a status read; a mode set to the same values).
constexpr auto kControlDeadline = std::chrono::seconds(10);

// ps:0 did not answer: Unavailable (exit 1, try again). It answered and
// refused who asked -- the cluster token, the TLS handshake with this
// side's certificate files: InputError (exit 2, fix the command).
[[noreturn]] void throwUnreachable(const std::string &psAddress, const grpc::Status &status)
{
    const std::string message = "cannot reach ps:0 at " + psAddress + ": " + describeRpcError(status);
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED
        || status.error_code() == grpc::StatusCode::PERMISSION_DENIED || isTlsFailure(status))
        throw InputError(message);
    throw Unavailable(message);
}

} // namespace

proto::SetModeResponse setClusterMode(const std::string &psAddress, const proto::ModeConfig &mode,
                                      const std::string &requestedBy, const RpcSettings &settings)
{
    auto stub = proto::ClusterControl::NewStub(makeChannel(psAddress, settings));
    proto::SetModeRequest request;
    *request.mutable_mode() = mode;
    request.set_requested_by(requestedBy);
    proto::SetModeResponse response;
    const auto status = callRidingOutDrops(settings, kControlDeadline, [&](grpc::ClientContext *context) {
        return stub->SetMode(context, request, &response);
    });
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        throw InputError("ps:0 at " + psAddress + " refused the mode: " + status.error_message());
    if (!status.ok())
        throwUnreachable(psAddress, status);
    return response;
}

proto::ClusterStatusResponse getClusterStatus(const std::string &psAddress, const RpcSettings &settings)
{
    auto stub = proto::ClusterControl::NewStub(makeChannel(psAddress, settings));
    proto::ClusterStatusResponse response;
    const auto status = callRidingOutDrops(settings, kControlDeadline, [&](grpc::ClientContext *context) {
        return stub->GetClusterStatus(context, {}, &response);
    });
    if (!status.ok())
        throwUnreachable(psAddress, status);
    return response;
}

std::string formatClusterStatus(const proto::ClusterStatusResponse &status)
{
    std::string text
        = "global step " + std::to_string(status.global_step())
          + (status.last_step() > 0 ? " of " + std::to_string(status.last_step()) : std::string(" (no last step)"))
          + ", mode " + describeMode(status.mode()) + (status.initialized() ? "" : " (not initialised yet)") + ", "
          + std::to_string(status.dropped_total()) + " stale gradients dropped\n";
    for (const auto &w : status.workers()) {
        std::string phase = proto::WorkerPhase_Name(w.phase());
        for (auto &c : phase)
            c = char(std::tolower(static_cast<unsigned char>(c)));
        text += "  worker:" + std::to_string(w.worker_index()) + "  " + phase + "  clock "
                + std::to_string(w.worker_clock()) + "  applied " + std::to_string(w.applied()) + "  dropped "
                + std::to_string(w.dropped());
        if (w.seconds_per_step() > 0) {
            char pace[48];
            std::snprintf(pace, sizeof pace, "  %.3f s a step", w.seconds_per_step());
            text += pace;
        }
        if (w.straggler())
            text += "  STRAGGLER (slower than --straggler_threshold allows)";
        if (!w.waiting_for().empty())
            text += "  waiting for " + w.waiting_for();
        if (!w.reason().empty())
            text += "  (" + w.reason() + ")";
        text += "\n";
    }
    if (status.acting_chief() != 0)
        text += "  worker:" + std::to_string(status.acting_chief())
                + " does the chief's duties while worker:0 is dead (--chief_handover=1)\n";
    if (status.has_replica()) {
        const auto &pair = status.replica();
        const bool primary = pair.role() == proto::REPLICA_PRIMARY;
        text += std::string("  ps:0 is a replicated pair: ") + (primary ? "primary " : "backup ") + pair.address()
                + (primary ? (pair.peer_attached()
                                  ? ", backup " + pair.peer() + " holds every acknowledged update"
                                  : ", no backup (" + pair.peer_lost_reason() + "): updates are not replicated")
                           : (pair.peer_attached() ? ", following its primary " + pair.peer()
                                                   : ", not following its primary " + pair.peer() + " ("
                                                         + pair.peer_lost_reason() + ")"));
        // Epoch 0: leases are off (--ps_lease_ms=0), or a node from before them.
        if (pair.epoch() > 0)
            text += primary && !pair.lease_held()
                        ? "; it does NOT hold its lease (epoch " + std::to_string(pair.epoch())
                              + ") and acknowledges nothing: " + pair.lease_problem()
                        : "; lease epoch " + std::to_string(pair.epoch());
        if (pair.failovers() > 0)
            text += "; " + std::to_string(pair.failovers()) + (pair.failovers() == 1 ? " failover" : " failovers")
                    + ", the last at global step " + std::to_string(pair.last_failover_step());
        if (pair.acknowledged_updates_lost() > 0)
            text += "; " + std::to_string(pair.acknowledged_updates_lost())
                    + " acknowledged updates lost (the pair's other process acknowledged them without a backup, "
                      "then went)";
        text += "\n";
    }
    if (!status.records_problem().empty())
        text += "run records: " + status.records_problem() + "\n";
    if (status.stall().seconds() > 0)
        text += "hang watchdog: no progress for " + std::to_string(int(status.stall().seconds())) + " s at global step "
                + std::to_string(status.stall().global_step()) + "; waiting for " + status.stall().waiting_for() + "\n";
    return text;
}

std::string runControlCommand(const ControlCommand &command)
{
    RpcSettings rpc = rpcSettingsFor(command.connection, false);
    rpc.clusterToken = resolveClusterToken(command.clusterTokenFile);
    // With a backup, whichever process of ps:0's pair serves: the primary
    // may be gone and the backup have taken over.
    std::string serving = command.ps0;
    proto::ClusterStatusResponse status;
    try {
        status = getClusterStatus(serving, rpc);
    } catch (const Unavailable &) {
        if (command.ps0Backup.empty())
            throw;
        serving = command.ps0Backup;
        status = getClusterStatus(serving, rpc);
    }
    if (!command.ps0Backup.empty() && status.replica().role() == proto::REPLICA_BACKUP) {
        const std::string other = serving == command.ps0 ? command.ps0Backup : command.ps0;
        try {
            const auto primary = getClusterStatus(other, rpc);
            if (primary.replica().role() == proto::REPLICA_PRIMARY) {
                status = primary;
                serving = other;
            }
        } catch (const Unavailable &) {
            // The backup's own view it is, then: it says why it does not follow.
        }
    }
    if (command.action == ControlCommand::Action::Status)
        return formatClusterStatus(status);
    const auto response = setClusterMode(serving, command.modeFrom(status.mode()), "parasync-node --set_mode", rpc);
    return "mode is now " + describeMode(response.mode()) + ", from global step "
           + std::to_string(response.global_step()) + "\n";
}

} // namespace parasync
