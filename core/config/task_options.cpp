#include "config/task_options.h"

#include "base/qt_text.h"
#include "config/flag_values.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonValue>

#include <utility>
#include <vector>

namespace parasync {

namespace {

// The training flags in --help order, with JSON types: numbers as numbers.
std::vector<std::pair<std::string, QJsonValue>> trainingEntries(const TrainingOptions &t)
{
    const auto number = [](auto value) { return QJsonValue(double(value)); };
    // Doubles hold integers exactly only up to 2^53; larger seeds stay exact as text.
    const QJsonValue seed
        = t.seed <= (uint64_t(1) << 53) ? QJsonValue(double(t.seed)) : QJsonValue(qs(std::to_string(t.seed)));
    return {
        {"mode", QJsonValue(qs(updateModeName(t.mode.mode())))},
        {"staleness", number(t.mode.staleness())},
        {"replicas_to_aggregate", number(t.mode.replicas_to_aggregate())},
        {"total_num_replicas", number(t.mode.total_num_replicas())},
        {"learning_rate_by_staleness", QJsonValue(t.mode.learning_rate_by_staleness() ? 1 : 0)},
        {"model", QJsonValue(qs(t.model))},
        {"dataset", QJsonValue(qs(t.dataset))},
        {"samples_per_shard", number(t.samplesPerShard)},
        {"eval_dataset", QJsonValue(qs(t.evalDataset))},
        // Empty when unset, as --dataset: a 0 would read back as a bad fraction.
        {"eval_fraction", t.evalFraction > 0 ? QJsonValue(t.evalFraction) : QJsonValue(QString())},
        {"optimizer", QJsonValue(qs(t.optimizer))},
        {"learning_rate", QJsonValue(qs(floatText(t.learningRate)).toDouble())},
        {"batch_size", number(t.batchSize)},
        {"last_step", number(t.lastStep)},
        {"display_step", number(t.displayStep)},
        {"staleness_probe_every", number(t.stalenessProbeEvery)},
        {"logdir", QJsonValue(qs(t.logdir))},
        {"save_checkpoint_secs", number(t.saveCheckpointSecs)},
        {"max_to_keep", number(t.maxToKeep)},
        {"logdir_max_mb", number(t.logdirMaxMb)},
        {"seed", seed},
        {"min_slice_bytes", number(t.minSliceBytes)},
        {"nonfinite_gradients", QJsonValue(t.applyNonfinite ? QStringLiteral("apply") : QStringLiteral("reject"))},
        {"hang_timeout_secs", number(t.hangTimeoutSecs)},
        {"max_workers", number(t.maxWorkers)},
        {"straggler_threshold", QJsonValue(qs(floatText(t.stragglerThreshold)).toDouble())},
        {"chief_handover", QJsonValue(t.chiefHandover ? 1 : 0)},
        {"compute_ms", number(t.pace.computeMs)},
        {"compute_jitter", QJsonValue(qs(floatText(t.pace.computeJitter)).toDouble())},
        {"straggler_ms", number(t.pace.stragglerMs)},
    };
}

} // namespace

TrainingOptions::TrainingOptions()
{
    mode.set_mode(proto::ASYNC);
    mode.set_staleness(kDefaultStaleness);
}

std::string TrainingOptions::toJson() const
{
    QJsonObject object;
    for (const auto &[name, value] : trainingEntries(*this))
        object.insert(qs(name), value);
    return QJsonDocument(object).toJson(QJsonDocument::Compact).toStdString();
}

} // namespace parasync
