#include "ui/headless/headless_mode_comparison.h"

#include "base/error.h"
#include "config/update_modes.h"
#include "config/workloads.h"
#include "engine/update_policy.h"
#include "ui/charts/mode_comparison_view.h"
#include "ui/headless/console.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace parasync::ui {

namespace {

std::string text(const QString &value)
{
    return value.toStdString();
}

} // namespace

std::vector<uint64_t> parseSeedList(const QString &value)
{
    std::vector<uint64_t> seeds;
    for (const QString &item : value.split(QLatin1Char(','))) {
        bool ok = false;
        const uint64_t seed = item.trimmed().toULongLong(&ok);
        if (!ok)
            throw InputError("--seeds takes whole numbers, comma-separated (--seeds=1,2,3); got '" + text(value) + "'");
        if (std::find(seeds.begin(), seeds.end(), seed) != seeds.end())
            throw InputError("--seeds names " + std::to_string(seed) + " twice: each seed runs once");
        seeds.push_back(seed);
    }
    return seeds;
}

ModeComparisonOptions modeComparisonOptionsFromArguments(const QCommandLineParser &parser, const ClusterPlan &plan)
{
    // optionNames(): only what was given (isSet on an option this binary
    // does not define would warn).
    const QStringList given = parser.optionNames();
    const auto has = [&given](const char *name) { return given.contains(QLatin1String(name)); };
    if (has("mode"))
        throw InputError("--compare_modes runs every update mode (async, sync, ssp) in turn: leave out --mode "
                         "(--modes chooses the contenders, --staleness sets ssp's bound)");
    if (has("connect") || has("open"))
        throw InputError("--compare_modes starts its own clusters: leave out --connect and --open");

    ModeComparisonOptions options;
    options.plan = withComparisonDefaults(plan);
    // What the user chose wins over the comparison's defaults.
    if (has("compute_ms") || has("compute_jitter") || has("straggler_ms")
        || (has("cluster_file") && !plan.workerPace.empty())) {
        options.plan.training.pace = plan.training.pace;
        options.plan.workerPace = plan.workerPace;
    }
    if (has("last_step"))
        options.plan.training.lastStep = plan.training.lastStep;
    options.modes = comparedModes(plan.training.mode.staleness());
    // A workload brings its own contenders and target; the flags still win.
    std::optional<Workload> named;
    if (has("workload"))
        named = workload(text(parser.value(QStringLiteral("workload"))));
    if (named)
        options.modes = parseModeSpecList(named->contenders);
    if (has("modes")) {
        try {
            options.modes = parseModeSpecList(text(parser.value(QStringLiteral("modes"))));
        } catch (const InputError &e) {
            throw InputError(std::string("--modes: ") + e.what());
        }
        // What ps:0 would refuse at start, refused before the first run.
        for (const proto::ModeConfig &mode : options.modes) {
            try {
                UpdatePolicy::validate(mode, plan.cluster.numWorkers());
            } catch (const InputError &e) {
                throw InputError("--modes: " + modeSpec(mode) + ": " + e.what());
            }
        }
    }

    options.runSeconds = named ? named->compareSeconds : kDefaultCompareSeconds;
    options.stopAtTarget = named ? named->stopAtTarget : true;
    if (has("compare_full_time"))
        options.stopAtTarget = false;
    if (has("compare_seconds")) {
        const QString value = parser.value(QStringLiteral("compare_seconds"));
        bool ok = false;
        options.runSeconds = value.toInt(&ok);
        if (!ok || options.runSeconds < 1)
            throw InputError("--compare_seconds must be a whole number of seconds per mode, at least 1; got '"
                             + text(value) + "'");
    }
    if (has("target_loss")) {
        const QString value = parser.value(QStringLiteral("target_loss"));
        bool ok = false;
        options.targetLoss = value.toDouble(&ok);
        if (!ok || !(options.targetLoss > 0) || !std::isfinite(options.targetLoss))
            throw InputError("--target_loss must be a positive number (the chief's full-shard loss to reach); got '"
                             + text(value) + "'");
    } else if (named) {
        options.targetLoss = named->targetLoss;
    } else {
        options.targetLoss = defaultTargetLoss(options.plan);
        if (!std::isfinite(options.targetLoss))
            throw InputError("give --target_loss: the " + options.plan.training.model
                             + " model's best loss cannot be worked out here to take a default from");
    }
    // Seeds: --seeds, else the workload's (unless --seed names one), else once.
    if (named && !has("seed"))
        options.seeds = named->seeds;
    if (has("seeds"))
        options.seeds = parseSeedList(parser.value(QStringLiteral("seeds")));
    options.outputDirectory = parser.value(QStringLiteral("export"));
    return options;
}

void refuseComparisonFlagsAlone(const QCommandLineParser &parser)
{
    const QStringList given = parser.optionNames();
    for (const char *name : {"modes", "compare_seconds", "target_loss", "compare_full_time", "seeds"})
        if (given.contains(QLatin1String(name)))
            throw InputError(std::string("--") + name + " only means something with --compare_modes: add "
                             + "--compare_modes, or leave out --" + name);
}

HeadlessModeComparison::HeadlessModeComparison(ModeComparisonOptions options, QObject *parent)
    : QObject(parent)
    , m_options(std::move(options))
    , m_comparison(new ModeComparison(this))
    , m_view(std::make_unique<ModeComparisonView>())
{
    m_view->resize(1800, 1500);
    connect(m_comparison, &ModeComparison::line, this, &say);
    connect(m_comparison, &ModeComparison::runEnded, this,
            [](int, const QString &name, const QString &, const QString &failure) {
                if (!failure.isEmpty())
                    complain(tr("The %1 run failed: %2").arg(name, failure));
            });
    connect(m_comparison, &ModeComparison::finished, this, &HeadlessModeComparison::onFinished);
}

HeadlessModeComparison::~HeadlessModeComparison() = default;

void HeadlessModeComparison::setNodeBinary(const QString &path)
{
    m_comparison->setNodeBinary(path);
}

void HeadlessModeComparison::start()
{
    if (m_options.outputDirectory.isEmpty()) {
        complain(tr("parasync: --headless --compare_modes needs --export=DIR: the folder for the three run "
                    "directories, the figure and comparison.csv"));
        Q_EMIT finished(CouldNotStart);
        return;
    }
    m_view->setSetting(describeComparisonSetting(m_options.plan, m_options.seeds));
    say(tr("Setting: %1").arg(describeComparisonSetting(m_options.plan, m_options.seeds)));
    QString error;
    if (!m_comparison->start(m_options, &error)) {
        complain(tr("parasync: %1").arg(error));
        Q_EMIT finished(CouldNotStart);
    }
}

void HeadlessModeComparison::printTable(const ModeComparisonSummary &summary) const
{
    say(tr("Results (target: the chief's full-shard loss at or below %1):").arg(summary.targetLoss, 0, 'g', 4));
    QStringList header{tr("mode"), tr("to target"), tr("at step"), tr("final loss")};
    // The held-out metrics any run logged: what the model learned, beside
    // how fast the training loss fell.
    const QStringList metricNames = heldOutMetricNames(summary);
    for (const QString &name : metricNames)
        header << tr("final %1").arg(metricText(name));
    header << tr("global steps/s") << tr("staleness median/p90/max");
    std::vector<int> workers;
    for (const ModeRunSummary &run : summary.runs)
        for (const WorkerStepFigures &worker : run.workers)
            if (std::find(workers.begin(), workers.end(), worker.worker) == workers.end())
                workers.push_back(worker.worker);
    std::sort(workers.begin(), workers.end());
    // A column per worker reads well up to a few workers; beyond, the spread.
    const bool perWorker = workers.size() <= kWorkersNamedAtMost;
    if (perWorker) {
        for (const int index : workers)
            header << tr("worker:%1 steps/s, waiting").arg(index);
    } else {
        header << tr("workers' steps/s min-max, median waiting");
    }
    header << tr("ended");
    std::vector<QStringList> rows{header};
    const bool repeated = repeatedOverSeeds(summary);
    for (const ModeRunSummary &run : summary.runs) {
        QStringList row{repeated ? tr("%1, seed %2").arg(modeRunLabel(run)).arg(run.seed) : modeRunLabel(run),
                        run.secondsToTarget ? QStringLiteral("%1 s").arg(*run.secondsToTarget, 0, 'f', 1)
                                            : tr("not reached"),
                        run.secondsToTarget ? QString::number(run.globalStepAtTarget) : QStringLiteral("-"),
                        std::isfinite(run.finalLoss) ? QString::number(run.finalLoss, 'g', 4) : QStringLiteral("-")};
        for (const QString &name : metricNames) {
            const double value = run.finalMetric(name);
            row << (std::isfinite(value) ? QString::number(value, 'g', 4) : QStringLiteral("-"));
        }
        row << QString::number(run.globalStepsPerSecond, 'f', 1);
        row << (run.staleness.gradients > 0 ? QStringLiteral("%1/%2/%3")
                                                  .arg(run.staleness.quantile(0.5))
                                                  .arg(run.staleness.quantile(0.9))
                                                  .arg(run.staleness.max)
                                            : QStringLiteral("-"));
        if (perWorker) {
            for (const int index : workers) {
                const auto it = std::find_if(run.workers.begin(), run.workers.end(),
                                             [index](const WorkerStepFigures &w) { return w.worker == index; });
                row << (it == run.workers.end() ? QStringLiteral("-")
                                                : QStringLiteral("%1, %2 %")
                                                      .arg(it->stepsPerSecond, 0, 'f', 1)
                                                      .arg(100 * it->waitFraction, 0, 'f', 0));
            }
        } else {
            row << (run.workers.empty() ? QStringLiteral("-")
                                        : workerRateSpread(run) + QStringLiteral(", ") + medianWaitingText(run));
        }
        row << (run.failure.isEmpty() ? run.stopReason
                                      : tr("failed: %1").arg(run.failure.section(QLatin1Char('\n'), 0, 0)));
        rows.push_back(row);
    }
    std::vector<int> widths(size_t(header.size()), 0);
    for (const QStringList &row : rows)
        for (qsizetype c = 0; c < row.size(); ++c)
            widths[size_t(c)] = std::max(widths[size_t(c)], int(row[c].size()));
    for (const QStringList &row : rows) {
        QString line = QStringLiteral("  ");
        for (qsizetype c = 0; c < row.size(); ++c)
            line += (c == 0 ? row[c].leftJustified(widths[size_t(c)]) : row[c].rightJustified(widths[size_t(c)]))
                    + QStringLiteral("   ");
        say(line.trimmed().prepend(QStringLiteral("  ")));
    }
    say(modeComparisonVerdict(summary));
}

void HeadlessModeComparison::onFinished(const ModeComparisonSummary &summary)
{
    m_view->setSummary(summary);
    printTable(summary);
    QString error;
    const bool exported = exportModeComparison(m_view.get(), m_options.outputDirectory, &m_written, &error);
    for (const QString &path : std::as_const(m_written))
        say(tr("wrote %1").arg(QDir::toNativeSeparators(path)));
    QStringList directories;
    for (const ModeRunSummary &run : summary.runs)
        directories << QDir::toNativeSeparators(run.directory);
    if (!directories.isEmpty())
        say(tr("The runs, side by side in the window: parasync --compare=%1").arg(directories.join(QLatin1Char(','))));
    if (!exported) {
        complain(error);
        Q_EMIT finished(RunFailed);
        return;
    }
    if (summary.failed()) {
        complain(tr("A run failed (see above); the figure shows what the runs recorded."));
        Q_EMIT finished(RunFailed);
        return;
    }
    if (summary.cancelled) {
        complain(tr("The comparison was cancelled before every mode ran."));
        Q_EMIT finished(RunFailed);
        return;
    }
    Q_EMIT finished(Success);
}

int runHeadlessModeComparison(const ModeComparisonOptions &options, const QString &nodeBinary)
{
    HeadlessModeComparison comparison(options);
    if (!nodeBinary.isEmpty())
        comparison.setNodeBinary(nodeBinary);
    QObject::connect(&comparison, &HeadlessModeComparison::finished, qApp,
                     [](int code) { QCoreApplication::exit(code); });
    QTimer::singleShot(0, &comparison, &HeadlessModeComparison::start);
    return QCoreApplication::exec();
}

} // namespace parasync::ui
