#include "ui/models/chart_style.h"

#include "orchestration/run_state.h"

#include <QObject>

#include <array>
#include <cmath>

namespace parasync::ui {

QColor workerColor(int worker)
{
    // Tableau 10 without its red (red means "dropped" here).
    static const std::array<QColor, 9> colors = {
        QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c),
        QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b), QColor(0xe3, 0x77, 0xc2),
        QColor(0x7f, 0x7f, 0x7f), QColor(0xbc, 0xbd, 0x22), QColor(0x17, 0xbe, 0xcf),
    };
    return colors[size_t(worker < 0 ? 0 : worker) % colors.size()];
}

QColor runColor(int run)
{
    return workerColor(run);
}

QColor waitColor(proto::WorkerPhase reason)
{
    switch (reason) {
    case proto::BLOCKED_BY_SYNC: return QColor(0x4e, 0x79, 0xa7, 110);      // blue-grey: the barrier
    case proto::BLOCKED_BY_STALENESS: return QColor(0xf2, 0x8e, 0x2b, 120); // amber: the staleness bound
    default: return QColor(0x9e, 0x9e, 0x9e, 90);
    }
}

QColor droppedColor()
{
    return QColor(0xd6, 0x27, 0x28);
}

QColor modeMarkerColor()
{
    return QColor(0x6a, 0x1b, 0x9a);
}

QColor failoverMarkerColor()
{
    return QColor(0xe6, 0x51, 0x00);
}

QColor stragglerMarkerColor()
{
    return QColor(0xad, 0x14, 0x57);
}

QString failoverLabel(const FailoverMarker &failover)
{
    return QStringLiteral("ps:0 failover @ %1").arg(failover.globalStep);
}

QColor chiefLossColor()
{
    return QColor(0x21, 0x21, 0x21);
}

QString shortModeLabel(const proto::ModeConfig &mode)
{
    const UpdateModeInfo *info = findUpdateMode(mode.mode());
    if (!info)
        return QStringLiteral("?");
    QString label = QString::fromLatin1(info->name);
    if (info->knobs.staleness)
        label += QStringLiteral(" s=%1").arg(mode.staleness());
    // "sync 15/16": 15 gradients a step of 16 replicas, one a backup.
    if (info->knobs.replicas && mode.replicas_to_aggregate() > 0)
        label += mode.total_num_replicas() > 0
                     ? QStringLiteral(" %1/%2").arg(mode.replicas_to_aggregate()).arg(mode.total_num_replicas())
                     : QStringLiteral(" r=%1").arg(mode.replicas_to_aggregate());
    // "÷S": the learning rate divided by each gradient's staleness.
    if (info->knobs.stalenessRule && mode.learning_rate_by_staleness())
        label += QStringLiteral(" lr\u00f7S");
    return label;
}

QString modeChangeLabel(const ModeMarker &change)
{
    return QStringLiteral("\u2192 %1 @ %2").arg(shortModeLabel(change.current)).arg(change.globalStep);
}

QString workerName(int worker)
{
    return QStringLiteral("worker:%1").arg(worker);
}

QString workerPhaseText(proto::WorkerPhase phase)
{
    switch (phase) {
    case proto::WAITING_FOR_CHIEF: return QObject::tr("waiting for the chief");
    case proto::TRAINING: return QObject::tr("training");
    case proto::BLOCKED_BY_SYNC: return QObject::tr("blocked by sync");
    case proto::BLOCKED_BY_STALENESS: return QObject::tr("blocked by staleness");
    case proto::FINISHED: return QObject::tr("finished");
    case proto::DEAD: return QObject::tr("dead");
    case proto::STOPPED: return QObject::tr("stopped");
    case proto::REJOINING: return QObject::tr("rejoining after a failover");
    default: return QObject::tr("not seen yet");
    }
}

QString lossAxisTitle(const std::string &model, bool logScale)
{
    QString what;
    // By name (the engine's model table is below this room): mlp:64 and
    // mf:5 are an mlp and an mf.
    const auto family
        = [&model](const char *name) { return model == name || model.rfind(std::string(name) + ":", 0) == 0; };
    if (family("linear") || family("mf"))
        what = QObject::tr("mean squared error");
    else if (family("softmax") || family("mlp"))
        what = QObject::tr("cross-entropy");
    if (logScale)
        what += what.isEmpty() ? QObject::tr("log scale") : QObject::tr(", log scale");
    return what.isEmpty() ? QObject::tr("loss") : QObject::tr("loss (%1)").arg(what);
}

QString metricLabel(const std::string &metricName)
{
    QString label = QString::fromStdString(metricName);
    if (label.startsWith(QLatin1String("heldout_")))
        label.replace(0, 8, QStringLiteral("held-out "));
    return label.replace(QLatin1Char('_'), QLatin1Char(' '));
}

MetricAxis metricAxis(const std::string &metricName)
{
    const auto endsWith = [&metricName](const std::string &suffix) {
        return metricName.size() >= suffix.size()
               && metricName.compare(metricName.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (endsWith("loss"))
        return MetricAxis::Loss;
    if (endsWith("accuracy"))
        return MetricAxis::Accuracy;
    return MetricAxis::None;
}

QColor metricColor(size_t metric)
{
    // Apart from the workers' colours and the chief's near-black.
    static const std::array<QColor, 3> colors
        = {QColor(0xd6, 0x27, 0x28), QColor(0x00, 0x6d, 0x2c), QColor(0x6a, 0x3d, 0x9a)};
    return colors[metric % colors.size()];
}

QStringList latestMetricTexts(const RunSnapshot &snapshot)
{
    QStringList texts;
    for (size_t i = 0; i < snapshot.metricNames.size() && i < snapshot.metricSeries.size(); ++i)
        if (!snapshot.metricSeries[i].isEmpty())
            texts << QStringLiteral("%1 %2")
                         .arg(metricLabel(snapshot.metricNames[i]))
                         .arg(snapshot.metricSeries[i].buckets().back().last, 0, 'g', 3);
    return texts;
}

} // namespace parasync::ui
