// WorkerTask: reaching every ps task, and joining each -- the chief's
// initialisation awaited, a data link opened where offered, a worker index
// held by an old connection waited out.

#include "node/worker_task.h"

#include "base/backoff.h"
#include "base/error.h"
#include "node/chief_duties.h"
#include "node/worker_ps_connection.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace parasync {

bool WorkerTask::waitForPs(int ps)
{
    PsConnection &connection = *m_ps[size_t(ps)];
    const std::string name = "ps:" + std::to_string(ps);
    Backoff backoff;
    for (;;) {
        // A cheap unary call tells reachable from not, with a reason we can
        // print, and -- with a backup -- which process of the pair serves.
        std::string why;
        std::optional<size_t> serving;
        std::optional<size_t> backupWithState;
        std::optional<size_t> backupWithoutState;
        size_t unreachable = 0;
        const std::vector<std::string> &addresses = connection.client->addresses();
        for (size_t p = 0; p < addresses.size() && !serving; ++p) {
            proto::TaskStatusResponse status;
            const CallResult result = connection.client->taskStatus(p, std::chrono::milliseconds(1000), &status);
            if (!result.ok()) {
                ++unreachable;
                why += (why.empty() ? "" : "; ")
                       + ("cannot reach " + name + " at " + addresses[p] + ": " + result.description);
            } else if (status.replica_role() == proto::REPLICA_PRIMARY
                       || (addresses.size() == 1 && status.replica_role() != proto::REPLICA_BACKUP)) {
                serving = p;
            } else if (status.replica_role() == proto::REPLICA_ROLE_UNSPECIFIED) {
                // One of a pair that has not taken its role yet.
                why += (why.empty() ? "" : "; ") + (name + " at " + addresses[p] + " is starting");
            } else if (status.replica_holds_state()) {
                backupWithState = p;
                why += (why.empty() ? "" : "; ") + (name + " at " + addresses[p] + " is the backup");
            } else {
                backupWithoutState = p;
                why += (why.empty() ? "" : "; ")
                       + (name + " at " + addresses[p] + " is a backup without the state yet");
            }
        }
        // No process serves, but a backup holds the state: the join makes it
        // take over if its primary is gone (or tells this worker where it is).
        // A backup without the state is turned to when its primary cannot be
        // reached at all: it serves in the primary's place, empty, once the
        // primary has been gone a few heartbeats, else says how long it waits.
        if (!serving && backupWithState && addresses.size() > 1)
            serving = backupWithState;
        if (!serving && backupWithoutState && unreachable + 1 == addresses.size())
            serving = backupWithoutState;
        if (serving) {
            if (connection.serving != *serving) {
                std::lock_guard lock(m_streamMutex);
                connection.serving = *serving;
                connection.address = addresses[*serving];
                m_log("worker:" + std::to_string(m_options.task.index) + ": " + name + " is served by "
                      + connection.address + " now");
            }
            return true;
        }
        setState(TaskPhase::Waiting, why);
        if (!backoff.wait(why, m_log, [this] { return stopping(); }))
            return false;
    }
}

bool WorkerTask::connectAndJoin()
{
    // A ps lost while joining (or a backup that does not serve yet) starts
    // the whole join again, after a pause that grows while it lasts.
    Backoff lost(std::chrono::milliseconds(200), std::chrono::seconds(2));
    for (;;) {
        std::string why;
        switch (joinAll(&why)) {
        case JoinOutcome::Joined: return true;
        case JoinOutcome::Stopping: return false;
        case JoinOutcome::Lost: break;
        }
        if (!lost.wait(why, m_log, [this] { return stopping(); }))
            return false;
    }
}

bool WorkerTask::offersDataLink() const
{
    // At every size: with the whole step on the link (offers_messages_on_
    // data_link) a 2-float step is one TCP exchange, where gRPC's own
    // framing costs more than the step's bytes (BENCHMARKS.md, raw gRPC echo).
    return m_options.connection.dataLink && !m_rpc.tls.enabled();
}

void WorkerTask::openDataLink(PsConnection &ps, const proto::DataLinkGrant &grant)
{
    if (!m_dataLinks)
        m_dataLinks = std::make_unique<DataLinkContext>();
    // As the ps: a link that moves no byte for two heartbeats is broken.
    const auto stall = std::max(std::chrono::milliseconds(2 * m_rpc.heartbeatMs), std::chrono::milliseconds(2000));
    std::string why;
    if (!ps.stream->openDataLink(*m_dataLinks, parseHostPort(ps.address).host, grant, stall, stall, &why))
        m_log("worker:" + std::to_string(m_options.task.index) + ": no data link to ps:" + std::to_string(ps.index)
              + " (" + why + "); its tensors go on the gRPC stream");
}

WorkerTask::JoinOutcome WorkerTask::joinAll(std::string *why)
{
    const int index = m_options.task.index;
    for (int k = 0; k < int(m_ps.size()); ++k)
        if (!waitForPs(k))
            return JoinOutcome::Stopping;
    if (m_options.task.isChief()) {
        Backoff backoff;
        // On a rejoin a ps may have lost its memory (restarted, or a backup
        // that took over without the state): the chief's own parameters are
        // the newest it can give when no checkpoint holds them.
        const Parameters *lastValues = m_joinedBefore ? &m_params : nullptr;
        for (std::string failure = m_chief->initializeVariables(lastValues, m_globalStep); !failure.empty();
             failure = m_chief->initializeVariables(lastValues, m_globalStep)) {
            setState(TaskPhase::Waiting, failure);
            if (!backoff.wait(failure, m_log, [this] { return stopping(); }))
                return JoinOutcome::Stopping;
        }
    }

    // The ps holds a join for up to a second and answers the moment the chief
    // has initialised; asking again at once keeps this worker in a held join,
    // so that a sync cluster's first step waits for it too.
    Backoff waitingForChief(std::chrono::milliseconds(10), std::chrono::milliseconds(10));
    Backoff indexHeld(std::chrono::milliseconds(500), std::chrono::seconds(2));
    for (auto &ps : m_ps) {
        {
            std::lock_guard lock(m_streamMutex);
            ps->openStream();
        }
        for (;;) {
            if (stopping())
                return JoinOutcome::Stopping;
            proto::TrainRequest request;
            auto *join = request.mutable_join();
            join->set_worker_index(index);
            join->set_pid(::getpid());
            join->set_host(m_hostName);
            join->set_address(m_options.cluster.address(m_options.task).toString());
            join->set_acknowledged_step(ps->acknowledged);
            *join->mutable_signature() = m_signature;
            join->set_offers_data_link(offersDataLink());
            join->set_offers_messages_on_data_link(offersDataLink());
            proto::TrainResponse response;
            if (!ps->stream->write(request) || !ps->stream->read(&response)) {
                const CallResult status = ps->stream->finish();
                {
                    std::lock_guard lock(m_streamMutex);
                    ps->stream.reset();
                }
                if (status.code == CallResult::Code::FailedPrecondition
                    || status.code == CallResult::Code::InvalidArgument
                    || status.code == CallResult::Code::AlreadyExists)
                    throw InputError(status.message);
                if (status.code == CallResult::Code::Aborted) {
                    // Our index's old connection is still open on the ps:
                    // ask again once it may have closed, saying why.
                    setState(TaskPhase::Waiting, status.message);
                    if (!indexHeld.wait(status.message, m_log, [this] { return stopping(); }))
                        return JoinOutcome::Stopping;
                    std::lock_guard lock(m_streamMutex);
                    ps->openStream();
                    continue;
                }
                *why = "reconnecting: lost ps:" + std::to_string(ps->index) + " at " + ps->address
                       + " while joining: " + status.description;
                setState(TaskPhase::Waiting, *why);
                return JoinOutcome::Lost;
            }
            if (!answerIsCurrent(*ps, response)) {
                *why = "reconnecting: ps:" + std::to_string(ps->index) + " at " + ps->address
                       + " answered under an ended lease";
                setState(TaskPhase::Waiting, *why);
                return JoinOutcome::Lost;
            }
            const auto &join_ = response.join();
            if (!join_.ready()) {
                const std::string what = "waiting for " + join_.waiting_for();
                setState(TaskPhase::Waiting, what);
                if (!waitingForChief.wait(what, m_log, [this] { return stopping(); }))
                    return JoinOutcome::Stopping;
                continue;
            }
            readParameters(ps->index, join_.parameters());
            if (join_.has_data_link())
                openDataLink(*ps, join_.data_link());
            if (ps->index == 0) {
                ps->acknowledged = join_.global_step();
                m_globalStep = join_.global_step();
                m_done = join_.last_step() > 0 && m_globalStep >= join_.last_step();
                // ps:0's --last_step ends the run; a worker started with
                // another one is told which counts, once.
                if (join_.last_step() != m_options.training.lastStep && m_clusterLastStep != join_.last_step())
                    m_log("worker:" + std::to_string(index)
                          + ": ps:0 runs to --last_step=" + std::to_string(join_.last_step()) + ", not this worker's "
                          + std::to_string(m_options.training.lastStep) + ": ps:0's decides");
                m_clusterLastStep = join_.last_step();
            }
            break;
        }
    }
    // Says what goes where: a link with frames carries the whole step, one
    // without (a ps that grants values only) the tensors' values.
    std::string wholeSteps;
    std::string valuesOnly;
    for (const auto &ps : m_ps) {
        if (!ps->stream->hasDataLink())
            continue;
        std::string &list = ps->stream->messagesOnDataLink() ? wholeSteps : valuesOnly;
        list += (list.empty() ? "ps:" : ", ps:") + std::to_string(ps->index);
    }
    // A sparse model's first batch needs its rows before the first step.
    // After a rejoin, a new batch: the one whose push broke may have been
    // applied before the answer was lost, and is given up as a dense
    // model's is (its rows would be stale too).
    if (hasTables()) {
        if (m_batch.empty() || m_joinedBefore) {
            m_batch = nextBatch();
            m_batchIds = touchedIds(m_batch);
        }
        if (!pullRows(m_batchIds, false, &m_batchRows)) {
            *why = "reconnecting: lost a ps task while pulling the first batch's rows";
            setState(TaskPhase::Waiting, *why);
            return JoinOutcome::Lost;
        }
    }
    std::string links;
    if (!wholeSteps.empty())
        links += " (steps on data links to " + wholeSteps + ")";
    if (!valuesOnly.empty())
        links += " (tensor values on data links to " + valuesOnly + ")";
    setState(TaskPhase::Training, "joined the cluster at global step " + std::to_string(m_globalStep) + links);
    m_joinedBefore = true;
    return JoinOutcome::Joined;
}

} // namespace parasync
