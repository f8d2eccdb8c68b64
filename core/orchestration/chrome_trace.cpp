#include "orchestration/chrome_trace.h"
#include "base/version.h"

#include "base/qt_text.h"
#include "config/update_modes.h"
#include "formats/run_log.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace parasync {

namespace {

// Thread ids: ps:0 is 1, worker N is N + 2 (tid 0 is avoided: some viewers
// treat it as "no thread").
constexpr int kPsThread = 1;
int workerThread(int worker)
{
    return worker + 2;
}

QJsonObject metadata(const char *name, int tid, const QString &value, int sortIndex = -1)
{
    QJsonObject event{{QStringLiteral("ph"), QStringLiteral("M")},
                      {QStringLiteral("pid"), 1},
                      {QStringLiteral("tid"), tid},
                      {QStringLiteral("name"), QLatin1String(name)},
                      {QStringLiteral("args"), QJsonObject{{QStringLiteral("name"), value}}}};
    if (sortIndex >= 0)
        event[QStringLiteral("args")] = QJsonObject{{QStringLiteral("sort_index"), sortIndex}};
    return event;
}

} // namespace

std::string chromeTraceJson(const RunSnapshot &snapshot)
{
    std::vector<StepRecord> steps = snapshot.recentSteps;
    std::stable_sort(steps.begin(), steps.end(),
                     [](const StepRecord &a, const StepRecord &b) { return a.wallTime < b.wallTime; });
    // The origin: the earliest moment any span starts, so no timestamp is negative.
    double origin = steps.empty() ? snapshot.startWallTime : steps.front().wallTime;
    for (const StepRecord &s : steps)
        origin = std::min(origin, s.wallTime - double(s.computeUs + s.waitUs) * 1e-6);
    for (const ModeMarker &m : snapshot.modeChanges)
        origin = std::min(origin, m.wallTime);
    const auto micros = [origin](double wallTime) { return std::round((wallTime - origin) * 1e6); };

    QJsonArray events;
    const QString psName = snapshot.psHosts.empty() ? QStringLiteral("ps:0")
                                                    : QStringLiteral("ps:0 (%1)").arg(qs(snapshot.psHosts.front()));
    events.append(metadata("process_name", 0, QStringLiteral("Parasync cluster")));
    events.append(metadata("thread_name", kPsThread, psName));
    events.append(metadata("thread_sort_index", kPsThread, {}, 0));
    std::map<int, std::vector<const StepRecord *>> byWorker;
    for (const StepRecord &s : steps)
        byWorker[s.worker].push_back(&s);
    int workers = int(snapshot.workerHosts.size());
    if (!byWorker.empty())
        workers = std::max(workers, byWorker.rbegin()->first + 1);
    for (int w = 0; w < workers; ++w) {
        QString name = QStringLiteral("worker:%1").arg(w);
        if (w == 0)
            name += QStringLiteral(" (chief)");
        if (w < int(snapshot.workerHosts.size()))
            name += QStringLiteral(" %1").arg(qs(snapshot.workerHosts[size_t(w)]));
        events.append(metadata("thread_name", workerThread(w), name));
        events.append(metadata("thread_sort_index", workerThread(w), {}, w + 1));
    }

    const auto span = [&events](const char *name, int tid, double startUs, double durationUs, QJsonObject args) {
        events.append(QJsonObject{{QStringLiteral("name"), QLatin1String(name)},
                                  {QStringLiteral("cat"), QStringLiteral("step")},
                                  {QStringLiteral("ph"), QStringLiteral("X")},
                                  {QStringLiteral("pid"), 1},
                                  {QStringLiteral("tid"), tid},
                                  {QStringLiteral("ts"), startUs},
                                  {QStringLiteral("dur"), durationUs},
                                  {QStringLiteral("args"), args}});
    };
    for (const auto &[worker, records] : byWorker) {
        const int tid = workerThread(worker);
        // A push is written once the next compute is known: the worker cannot
        // push and compute at once, so the push ends where that compute starts.
        struct Pending
        {
            double start = 0, end = 0;
            QJsonObject args;
            std::vector<std::pair<double, double>> waits; // nested [start, end)
            QString waitReason;
        } pending;
        bool havePending = false;
        double computedUntil = 0;
        const auto flush = [&](double limit) {
            if (!havePending)
                return;
            const double end = std::max(pending.start, std::min(pending.end, limit));
            span("push", tid, pending.start, end - pending.start, pending.args);
            for (const auto &[from, to] : pending.waits) {
                const double waitEnd = std::min(to, end);
                if (waitEnd > from) {
                    QJsonObject args = pending.args;
                    args[QStringLiteral("reason")] = pending.waitReason;
                    span("wait", tid, from, waitEnd - from, args);
                }
            }
            havePending = false;
        };
        for (size_t k = 0; k < records.size(); ++k) {
            const StepRecord &s = *records[k];
            const StepRecord *next = k + 1 < records.size() ? records[k + 1] : nullptr;
            const double decided = micros(s.wallTime);
            const double syncWait = s.waitReason == proto::BLOCKED_BY_SYNC ? double(s.waitUs) : 0;
            const double holdAfter = next && next->waitReason == proto::BLOCKED_BY_STALENESS ? double(next->waitUs) : 0;
            const double roundTrip = next ? double(next->pushUs) : 0; // unknown for the last step
            const double arrival = decided - syncWait;
            const QJsonObject args{{QStringLiteral("global_step"), qint64(s.globalStep)},
                                   {QStringLiteral("worker_clock"), qint64(s.workerClock)},
                                   {QStringLiteral("computed_from_step"), qint64(s.computedFromStep)},
                                   {QStringLiteral("staleness"), qint64(s.staleness)},
                                   {QStringLiteral("outcome"), QLatin1String(outcomeName(s.outcome))},
                                   {QStringLiteral("batch_loss"), double(s.batchLoss)}};
            const double computeStart = std::max(arrival - double(s.computeUs), computedUntil);
            flush(computeStart);
            span("compute", tid, computeStart, std::max(0.0, arrival - computeStart), args);
            computedUntil = std::max(arrival, computeStart);

            pending = Pending{computedUntil, computedUntil + syncWait + holdAfter + roundTrip, args, {}, {}};
            if (syncWait > 0) {
                pending.waits.emplace_back(computedUntil, computedUntil + syncWait);
                pending.waitReason = QStringLiteral("sync barrier");
            } else if (holdAfter > 0) {
                pending.waits.emplace_back(computedUntil, computedUntil + holdAfter);
                pending.waitReason = QStringLiteral("staleness bound");
            }
            havePending = pending.end > pending.start;
        }
        flush(std::numeric_limits<double>::infinity());
    }
    for (const ModeMarker &m : snapshot.modeChanges) {
        events.append(
            QJsonObject{{QStringLiteral("name"), QStringLiteral("mode: %1").arg(qs(describeMode(m.current)))},
                        {QStringLiteral("cat"), QStringLiteral("mode")},
                        {QStringLiteral("ph"), QStringLiteral("i")},
                        {QStringLiteral("s"), QStringLiteral("g")},
                        {QStringLiteral("pid"), 1},
                        {QStringLiteral("tid"), kPsThread},
                        {QStringLiteral("ts"), micros(m.wallTime)},
                        {QStringLiteral("args"), QJsonObject{{QStringLiteral("global_step"), qint64(m.globalStep)},
                                                             {QStringLiteral("previous"), qs(describeMode(m.previous))},
                                                             {QStringLiteral("requested_by"), qs(m.requestedBy)}}}});
    }
    for (const auto &[step, wallTime] : snapshot.checkpoints) {
        events.append(
            QJsonObject{{QStringLiteral("name"), QStringLiteral("checkpoint")},
                        {QStringLiteral("cat"), QStringLiteral("checkpoint")},
                        {QStringLiteral("ph"), QStringLiteral("i")},
                        {QStringLiteral("s"), QStringLiteral("t")},
                        {QStringLiteral("pid"), 1},
                        {QStringLiteral("tid"), workerThread(0)},
                        {QStringLiteral("ts"), micros(wallTime)},
                        {QStringLiteral("args"), QJsonObject{{QStringLiteral("global_step"), qint64(step)}}}});
    }

    const QJsonObject trace{
        {QStringLiteral("traceEvents"), events},
        {QStringLiteral("displayTimeUnit"), QStringLiteral("ms")},
        {QStringLiteral("otherData"),
         QJsonObject{{QStringLiteral("producer"), QString(QStringLiteral("Parasync ") + QLatin1String(version()))},
                     {QStringLiteral("clock"), QStringLiteral("ps:0 wall time, microseconds since the origin")},
                     {QStringLiteral("origin_unix_seconds"), origin},
                     {QStringLiteral("steps"), qint64(steps.size())},
                     {QStringLiteral("global_step"), qint64(snapshot.globalStep)}}}};
    return QJsonDocument(trace).toJson(QJsonDocument::Compact).toStdString();
}

} // namespace parasync
