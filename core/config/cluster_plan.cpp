#include "config/cluster_plan.h"

#include "base/qt_text.h"
#include "config/cluster_file.h"
#include "config/update_modes.h"

#include <QLocale>

#include <charconv>

namespace parasync {

namespace {

// A float's shortest spelling ("0.05", not 0.0500000007), as a user types it.
QString floatText(float value)
{
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return QString::fromLatin1(buffer, int(result.ptr - buffer));
}

} // namespace

ClusterPlan ClusterPlan::demo()
{
    ClusterPlan plan;
    plan.cluster.ps = {parseHostPort("127.0.0.1:2222")};
    plan.cluster.workers = {parseHostPort("127.0.0.1:2223"), parseHostPort("127.0.0.1:2224")};
    return plan;
}

const RemoteHost *ClusterPlan::remoteHost(const TaskId &task) const
{
    const std::string &name = cluster.address(task).host;
    for (const RemoteHost &host : hosts)
        if (host.name == name)
            return &host;
    return nullptr;
}

WorkerPace ClusterPlan::paceOf(int worker) const
{
    const auto it = workerPace.find(worker);
    return it != workerPace.end() ? it->second : training.pace;
}

const std::vector<std::string> &ClusterPlan::commandOf(int worker) const
{
    const auto it = workerCommands.find(worker);
    return it != workerCommands.end() ? it->second : workerCommand;
}

std::vector<TaskId> ClusterPlan::tasks() const
{
    std::vector<TaskId> out;
    for (int i = 0; i < cluster.numPs(); ++i)
        out.push_back(TaskId{JobName::Ps, i});
    for (int i = 0; i < int(cluster.psBackups.size()); ++i)
        out.push_back(TaskId{JobName::PsBackup, i});
    for (int i = 0; i < cluster.numWorkers(); ++i)
        out.push_back(TaskId{JobName::Worker, i});
    return out;
}

namespace {

void addFlag(QStringList &args, const char *name, const QString &value)
{
    args << QStringLiteral("--") + QLatin1String(name) + QLatin1Char('=') + value;
}

QStringList clusterArguments(const ClusterSpec &cluster, const TaskId &task)
{
    const auto hosts = [](const std::vector<HostPort> &list) {
        QStringList out;
        for (const auto &address : list)
            out << qs(address.toString());
        return out.join(QLatin1Char(','));
    };
    QStringList args{QStringLiteral("--ps_hosts=") + hosts(cluster.ps)};
    // Every task, workers too: a worker turns to a ps task's backup when it dies.
    if (cluster.replicated())
        args << QStringLiteral("--ps_backup_hosts=") + hosts(cluster.psBackups);
    args << QStringLiteral("--worker_hosts=") + hosts(cluster.workers)
         << QStringLiteral("--job_name=") + qs(jobNameString(task.job))
         << QStringLiteral("--task_index=") + QString::number(task.index);
    return args;
}

// TLS files are paths, safe on a command line (the token is not).
// --tls_mutual is the serving side's rule, which parasync-node takes and a
// Python worker does not.
void addConnectionArguments(QStringList &args, const ConnectionOptions &c, bool withMutual)
{
    const ConnectionOptions defaults;
    if (!c.tlsCert.empty())
        addFlag(args, "tls_cert", qs(c.tlsCert));
    if (!c.tlsKey.empty())
        addFlag(args, "tls_key", qs(c.tlsKey));
    if (!c.tlsCa.empty())
        addFlag(args, "tls_ca", qs(c.tlsCa));
    if (c.tlsMutual && withMutual)
        args << QStringLiteral("--tls_mutual");
    if (c.maxMessageBytes != defaults.maxMessageBytes)
        addFlag(args, "max_message_bytes", QString::number(c.maxMessageBytes));
    if (c.heartbeatMs != defaults.heartbeatMs)
        addFlag(args, "heartbeat_ms", QString::number(c.heartbeatMs));
    if (c.dataLink != defaults.dataLink)
        addFlag(args, "data_link", c.dataLink ? QStringLiteral("1") : QStringLiteral("0"));
    if (c.psLeaseMs != defaults.psLeaseMs)
        addFlag(args, "ps_lease_ms", QString::number(c.psLeaseMs));
}

} // namespace

QStringList ClusterPlan::commandArguments(const TaskId &task) const
{
    QStringList args = clusterArguments(cluster, task);
    // The chief keeps the run's checkpoints beside what ps:0 writes, and
    // restores from them, as parasync-node's chief does.
    const TrainingOptions defaults;
    // Part of the model's signature: every worker splits its variables the
    // same way, or ps:0 refuses it.
    if (task.job == JobName::Worker && training.minSliceBytes != defaults.minSliceBytes)
        addFlag(args, "min_slice_bytes", QString::number(training.minSliceBytes));
    if (task.job == JobName::Worker && task.index == 0) {
        if (training.logdir != defaults.logdir)
            addFlag(args, "logdir", qs(training.logdir));
        if (training.saveCheckpointSecs != defaults.saveCheckpointSecs)
            addFlag(args, "save_checkpoint_secs", QString::number(training.saveCheckpointSecs));
        if (training.maxToKeep != defaults.maxToKeep)
            addFlag(args, "max_to_keep", QString::number(training.maxToKeep));
    }
    addConnectionArguments(args, connection, false);
    return args;
}

QStringList ClusterPlan::arguments(const TaskId &task) const
{
    QStringList args = clusterArguments(cluster, task);

    const TrainingOptions defaults;
    const TrainingOptions &t = training;
    const auto flag = [&args](const char *name, const QString &value) { addFlag(args, name, value); };
    // The mode is what people compare runs by: always spelled out.
    if (t.mode.mode() != proto::UPDATE_MODE_UNSPECIFIED)
        flag("mode", qs(updateModeName(t.mode.mode())));
    const UpdateModeInfo *mode = findUpdateMode(t.mode.mode());
    if ((mode && mode->knobs.staleness) || t.mode.staleness() != defaults.mode.staleness())
        flag("staleness", QString::number(t.mode.staleness()));
    if (t.mode.replicas_to_aggregate() != defaults.mode.replicas_to_aggregate())
        flag("replicas_to_aggregate", QString::number(t.mode.replicas_to_aggregate()));
    if (t.mode.total_num_replicas() != defaults.mode.total_num_replicas())
        flag("total_num_replicas", QString::number(t.mode.total_num_replicas()));
    if (t.mode.learning_rate_by_staleness())
        flag("learning_rate_by_staleness", QStringLiteral("1"));
    if (t.model != defaults.model)
        flag("model", qs(t.model));
    if (t.dataset != defaults.dataset)
        flag("dataset", qs(t.dataset));
    if (t.samplesPerShard != defaults.samplesPerShard)
        flag("samples_per_shard", QString::number(t.samplesPerShard));
    if (t.evalDataset != defaults.evalDataset)
        flag("eval_dataset", qs(t.evalDataset));
    if (t.evalFraction != defaults.evalFraction)
        flag("eval_fraction", QString::number(t.evalFraction, 'g', QLocale::FloatingPointShortest));
    if (t.optimizer != defaults.optimizer)
        flag("optimizer", qs(t.optimizer));
    if (t.learningRate != defaults.learningRate)
        flag("learning_rate", floatText(t.learningRate));
    if (t.batchSize != defaults.batchSize)
        flag("batch_size", QString::number(t.batchSize));
    if (t.lastStep != defaults.lastStep)
        flag("last_step", QString::number(t.lastStep));
    if (t.displayStep != defaults.displayStep)
        flag("display_step", QString::number(t.displayStep));
    if (t.stalenessProbeEvery != defaults.stalenessProbeEvery)
        flag("staleness_probe_every", QString::number(t.stalenessProbeEvery));
    if (t.logdir != defaults.logdir)
        flag("logdir", qs(t.logdir));
    if (t.saveCheckpointSecs != defaults.saveCheckpointSecs)
        flag("save_checkpoint_secs", QString::number(t.saveCheckpointSecs));
    if (t.maxToKeep != defaults.maxToKeep)
        flag("max_to_keep", QString::number(t.maxToKeep));
    if (t.logdirMaxMb != defaults.logdirMaxMb)
        flag("logdir_max_mb", QString::number(t.logdirMaxMb));
    if (t.seed != defaults.seed)
        flag("seed", QString::number(t.seed));
    if (t.minSliceBytes != defaults.minSliceBytes)
        flag("min_slice_bytes", QString::number(t.minSliceBytes));
    if (t.applyNonfinite != defaults.applyNonfinite)
        flag("nonfinite_gradients", t.applyNonfinite ? QStringLiteral("apply") : QStringLiteral("reject"));
    if (t.hangTimeoutSecs != defaults.hangTimeoutSecs)
        flag("hang_timeout_secs", QString::number(t.hangTimeoutSecs));
    if (t.maxWorkers != defaults.maxWorkers)
        flag("max_workers", QString::number(t.maxWorkers));
    if (t.stragglerThreshold != defaults.stragglerThreshold)
        flag("straggler_threshold", QString::number(double(t.stragglerThreshold), 'g', QLocale::FloatingPointShortest));
    if (t.chiefHandover != defaults.chiefHandover)
        flag("chief_handover", t.chiefHandover ? QStringLiteral("1") : QStringLiteral("0"));
    {
        // Only workers step. A ps gets the cluster's common pace all the
        // same: ps:0 writes the run's flags into cluster.json, and the run
        // report would otherwise show a paced run as one at full speed.
        const WorkerPace pace = task.job == JobName::Worker ? paceOf(task.index) : training.pace;
        if (pace.computeMs != defaults.pace.computeMs)
            flag("compute_ms", QString::number(pace.computeMs));
        if (pace.computeJitter != defaults.pace.computeJitter)
            flag("compute_jitter", floatText(pace.computeJitter));
        if (pace.stragglerMs != defaults.pace.stragglerMs)
            flag("straggler_ms", QString::number(pace.stragglerMs));
    }

    addConnectionArguments(args, connection, true);
    return args;
}

} // namespace parasync
