#include "ui/charts/mode_comparison_view.h"

#include "base/qt_text.h"
#include "config/task_options.h"
#include "config/update_modes.h"
#include "ui/charts/chart_exporter.h"
#include "ui/models/chart_style.h"

#include <QDir>
#include <QFontMetricsF>
#include <QGridLayout>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

namespace parasync::ui {

namespace {

// A failure with the task's last output lines, as one CSV cell a
// spreadsheet shows on one line.
QString oneLine(const QString &text)
{
    QStringList lines = text.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (QString &line : lines)
        line = line.trimmed();
    return lines.join(QStringLiteral(" / "));
}

QString seedList(const ContenderSpread &contender)
{
    QStringList seeds;
    for (const uint64_t seed : contender.seeds)
        seeds << QString::number(seed);
    return seeds.join(QStringLiteral(", "));
}

// The figure's table over seeds: a column per contender, each cell a
// median with its range.
CsvTable contenderTable(const ModeComparisonSummary &summary)
{
    const std::vector<ContenderSpread> contenders = contenderSpreads(summary);
    CsvTable table;
    table.header << QString();
    for (const ContenderSpread &c : contenders)
        table.header << modeRunLabel(summary.runs[c.runs.front()]);
    const auto row = [&](const QString &name, const auto &cell) {
        QStringList fields{name};
        for (const ContenderSpread &c : contenders)
            fields << cell(c);
        table.rows.push_back(fields);
    };
    row(QObject::tr("seeds"), &seedList);
    row(QObject::tr("time to target, s"), [](const ContenderSpread &c) {
        return c.secondsToTarget.any() ? spreadText(c.secondsToTarget, 1) : QObject::tr("not reached");
    });
    row(QObject::tr("at global step"), [](const ContenderSpread &c) { return spreadText(c.globalStepAtTarget, 0); });
    row(QObject::tr("final full loss"), [](const ContenderSpread &c) { return spreadText(c.finalLoss, 3, 'g'); });
    for (const QString &metric : heldOutMetricNames(summary))
        row(QObject::tr("final %1").arg(metricText(metric)), [&metric](const ContenderSpread &c) {
            const auto it = c.finalMetrics.find(metric);
            return it == c.finalMetrics.end() ? QStringLiteral("–") : spreadText(it->second, 3, 'g');
        });
    row(QObject::tr("staleness median"), [](const ContenderSpread &c) { return spreadText(c.stalenessMedian, 0); });
    row(QObject::tr("global steps/s"), [](const ContenderSpread &c) { return spreadText(c.globalStepsPerSecond, 1); });
    row(QObject::tr("ended"), [&summary](const ContenderSpread &c) {
        std::map<QString, int> reasons;
        for (const size_t index : c.runs) {
            const ModeRunSummary &run = summary.runs[index];
            ++reasons[run.failure.isEmpty() ? run.stopReason : QObject::tr("failed")];
        }
        QStringList parts;
        for (const auto &[reason, count] : reasons)
            parts << (count > 1 ? QStringLiteral("%1× %2").arg(count).arg(reason) : reason);
        return parts.join(QStringLiteral(", "));
    });
    return table;
}

// One figure's sentence over seeds: the differences beyond the spread, and
// only those -- "sync, sync 15/16 beat async, ssp s=10" -- or that there are
// none. The medians and ranges are in the table beside it.
QString spreadSentence(const QString &figureName, const std::vector<ContenderSpread> &contenders,
                       const ModeComparisonSummary &summary,
                       const std::function<Spread(const ContenderSpread &)> &figure, bool higherIsBetter,
                       bool missingIsWorst)
{
    bool any = false;
    for (const ContenderSpread &c : contenders)
        any = any || figure(c).any();
    if (!any)
        return {};
    const auto label = [&](size_t i) { return modeRunLabel(summary.runs[contenders[i].runs.front()]); };
    // Best median first, so that the sentence reads from the winner down.
    std::vector<size_t> order(contenders.size());
    std::iota(order.begin(), order.end(), size_t(0));
    const auto rank = [&](size_t i) {
        const Spread s = figure(contenders[i]);
        if (!s.any())
            return std::numeric_limits<double>::infinity();
        return higherIsBetter ? -s.median : s.median;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });
    std::map<size_t, QStringList> beaten;
    for (const auto &[better, worse] : differencesBeyondSpread(contenders, figure, higherIsBetter, missingIsWorst))
        beaten[better] << label(worse);
    // Contenders that beat the same others share a clause.
    std::vector<std::pair<QStringList, QString>> clauses; // winners, whom they beat
    for (const size_t i : order) {
        if (!beaten.count(i))
            continue;
        const QString losers = beaten[i].join(QStringLiteral(", "));
        auto it = std::find_if(clauses.begin(), clauses.end(), [&](const auto &c) { return c.second == losers; });
        if (it == clauses.end())
            clauses.push_back({{label(i)}, losers});
        else
            it->first << label(i);
    }
    QStringList parts;
    for (const auto &[winners, losers] : clauses)
        parts << (winners.size() > 1 ? QObject::tr("%1 beat %2") : QObject::tr("%1 beats %2"))
                     .arg(winners.join(QStringLiteral(", ")), losers);
    return QObject::tr("%1: %2.").arg(figureName, parts.isEmpty() ? QObject::tr("no difference exceeds the spread")
                                                                  : parts.join(QStringLiteral("; ")));
}

QString spreadVerdict(const ModeComparisonSummary &summary)
{
    const std::vector<ContenderSpread> contenders = contenderSpreads(summary);
    size_t seeds = 0;
    for (const ContenderSpread &c : contenders)
        seeds = std::max(seeds, c.runs.size());
    QStringList sentences{QObject::tr("Over %1 seeds, a difference is named only where every seed of one beat every "
                                      "seed of the other.")
                              .arg(seeds)};
    sentences << spreadSentence(
        QObject::tr("Time to a full loss of %1").arg(lossText(summary.targetLoss)), contenders, summary,
        [](const ContenderSpread &c) { return c.secondsToTarget; }, false, true);
    const QString metric = heldOutMetric(summary);
    if (!metric.isEmpty())
        sentences << spreadSentence(
            QObject::tr("Final %1").arg(metricText(metric)), contenders, summary,
            [&metric](const ContenderSpread &c) {
                const auto it = c.finalMetrics.find(metric);
                return it == c.finalMetrics.end() ? Spread{} : it->second;
            },
            higherIsBetter(metric), false);
    sentences.removeAll(QString());
    return sentences.join(QLatin1Char(' '));
}

} // namespace

// ---------------------------------------------------------------------------

ModeSummaryTable::ModeSummaryTable(QWidget *parent) : QWidget(parent)
{
    setMinimumSize(300, 220);
}

QString ModeSummaryTable::title() const
{
    return tr("The numbers");
}

void ModeSummaryTable::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    update();
}

CsvTable ModeSummaryTable::csv() const
{
    CsvTable table;
    if (!m_summary)
        return table;
    if (repeatedOverSeeds(*m_summary))
        return contenderTable(*m_summary);
    table.header << QString();
    for (const ModeRunSummary &run : m_summary->runs)
        table.header << modeRunLabel(run);
    const auto row = [&](const QString &name, const auto &cell) {
        QStringList fields{name};
        for (const ModeRunSummary &run : m_summary->runs)
            fields << cell(run);
        table.rows.push_back(fields);
    };
    row(tr("time to target"), [](const ModeRunSummary &run) { return timeToTargetText(run); });
    row(tr("at global step"), [](const ModeRunSummary &run) {
        return run.secondsToTarget ? QString::number(run.globalStepAtTarget) : QStringLiteral("–");
    });
    row(tr("final full loss"), [](const ModeRunSummary &run) { return lossText(run.finalLoss); });
    // What the pace cost: the held-out metrics and the staleness behind them.
    const QStringList metrics = heldOutMetricNames(*m_summary);
    for (const QString &metric : metrics)
        row(tr("final %1").arg(metricText(metric)),
            [&metric](const ModeRunSummary &run) { return lossText(run.finalMetric(metric)); });
    row(tr("staleness median/p90/max"), [](const ModeRunSummary &run) {
        const StalenessFigures &staleness = run.staleness;
        return staleness.gradients == 0 ? QStringLiteral("–")
                                        : QStringLiteral("%1 / %2 / %3")
                                              .arg(staleness.quantile(0.5))
                                              .arg(staleness.quantile(0.9))
                                              .arg(staleness.max);
    });
    row(tr("global steps/s"),
        [](const ModeRunSummary &run) { return QString::number(run.globalStepsPerSecond, 'f', 1); });
    const std::vector<int> workers = workerIndices(*m_summary);
    if (workers.size() > kWorkersNamedAtMost) {
        row(tr("workers' steps/s"), &workerRateSpread);
        row(tr("median waiting"), &medianWaitingText);
    }
    for (const int index : workers.size() > kWorkersNamedAtMost ? std::vector<int>() : workers) {
        row(tr("%1 steps/s").arg(workerName(index)), [index](const ModeRunSummary &run) {
            const WorkerStepFigures *worker = workerOf(run, index);
            return worker ? QString::number(worker->stepsPerSecond, 'f', 1) : QStringLiteral("–");
        });
        row(tr("%1 waiting").arg(workerName(index)), [index](const ModeRunSummary &run) {
            const WorkerStepFigures *worker = workerOf(run, index);
            return worker ? QStringLiteral("%1 %").arg(100 * worker->waitFraction, 0, 'f', 0) : QStringLiteral("–");
        });
    }
    row(tr("run length"), [](const ModeRunSummary &run) { return secondsText(run.seconds); });
    row(tr("ended"), [](const ModeRunSummary &run) { return run.failure.isEmpty() ? run.stopReason : tr("failed"); });
    return table;
}

int ModeSummaryTable::pointCount() const
{
    return m_summary ? int(m_summary->runs.size()) : 0;
}

void ModeSummaryTable::renderTo(QPainter *painter, const QRectF &target)
{
    painter->save();
    painter->fillRect(target, Qt::white);
    const CsvTable table = csv();
    // A column per run, or over seeds per contender: its colour heads it.
    std::vector<QColor> colors;
    if (m_summary && repeatedOverSeeds(*m_summary)) {
        for (const ContenderSpread &contender : contenderSpreads(*m_summary))
            colors.push_back(modeRunColor(m_summary->runs, contender.runs.front()));
    } else if (m_summary) {
        for (size_t i = 0; i < m_summary->runs.size(); ++i)
            colors.push_back(modeRunColor(m_summary->runs, i));
    }
    const double margin = 12;
    const QRectF area = target.adjusted(margin, margin, -margin, -margin);
    QFont titleFont = painter->font();
    titleFont.setBold(true);
    titleFont.setPixelSize(std::max(11, int(area.height() / 22)));
    painter->setFont(titleFont);
    painter->setPen(Qt::black);
    const double titleHeight = titleFont.pixelSize() * 1.8;
    painter->drawText(QRectF(area.left(), area.top(), area.width(), titleHeight), Qt::AlignHCenter | Qt::AlignTop,
                      title());
    if (table.rows.empty()) {
        painter->restore();
        return;
    }
    const int rows = int(table.rows.size()) + 1;
    const double rowHeight = std::min(34.0, (area.height() - titleHeight) / rows);
    const int columns = int(table.header.size());
    QFont cellFont = painter->font();
    cellFont.setBold(false);
    cellFont.setPixelSize(std::max(9, int(rowHeight * 0.5)));
    QFont headFont = cellFont;
    headFont.setBold(true);
    // The row names as wide as the longest needs, up to half the table.
    double nameWidth = 0;
    const QFontMetricsF headMetrics(headFont, painter->device());
    for (const QStringList &row : table.rows)
        nameWidth = std::max(nameWidth, headMetrics.horizontalAdvance(row.value(0)));
    const double firstColumn = std::min(area.width() * 0.5, nameWidth + 16);
    const double columnWidth = (area.width() - firstColumn) / std::max(1, columns - 1);
    double y = area.top() + titleHeight;
    for (int r = 0; r < rows; ++r) {
        const QStringList &fields = r == 0 ? table.header : table.rows[size_t(r - 1)];
        if (r % 2 == 0 && r > 0)
            painter->fillRect(QRectF(area.left(), y, area.width(), rowHeight), QColor(0xf3, 0xf3, 0xf3));
        for (int c = 0; c < columns && c < fields.size(); ++c) {
            const QRectF cell
                = c == 0 ? QRectF(area.left() + 4, y, firstColumn - 4, rowHeight)
                         : QRectF(area.left() + firstColumn + (c - 1) * columnWidth, y, columnWidth, rowHeight);
            QFont font = r == 0 || c == 0 ? headFont : cellFont;
            // A median with its range that does not fit on one line goes on
            // two: "0.9" over "(0.8–2.3)".
            QString cellText = fields[c];
            const qsizetype range = cellText.indexOf(QStringLiteral(" ("));
            if (c > 0 && r > 0 && range > 0
                && QFontMetricsF(font, painter->device()).horizontalAdvance(cellText) > cell.width() - 6) {
                const QString top = cellText.left(range), bottom = cellText.mid(range + 1);
                font.setPixelSize(std::max(8, int(font.pixelSize() * 0.8)));
                const double width = QFontMetricsF(font, painter->device()).horizontalAdvance(bottom);
                if (width > cell.width() - 6)
                    font.setPixelSize(std::max(7, int(font.pixelSize() * std::max(0.7, (cell.width() - 6) / width))));
                painter->setFont(font);
                painter->setPen(QColor(0x20, 0x20, 0x20));
                painter->drawText(cell, Qt::AlignHCenter | Qt::AlignVCenter, top + QLatin1Char('\n') + bottom);
                continue;
            }
            // A long cell ("target reached") gets a smaller font before it is cut.
            const double advance = QFontMetricsF(font, painter->device()).horizontalAdvance(fields[c]);
            if (advance > cell.width() - 6)
                font.setPixelSize(std::max(8, int(font.pixelSize() * std::max(0.7, (cell.width() - 6) / advance))));
            painter->setFont(font);
            painter->setPen(r == 0 && c > 0 && size_t(c - 1) < colors.size() ? colors[size_t(c - 1)].darker(120)
                                                                             : QColor(0x20, 0x20, 0x20));
            const QString text = painter->fontMetrics().elidedText(fields[c], Qt::ElideRight, int(cell.width()) - 4);
            painter->drawText(cell, (c == 0 ? Qt::AlignLeft : Qt::AlignHCenter) | Qt::AlignVCenter, text);
        }
        y += rowHeight;
        if (r == 0) {
            painter->setPen(QColor(0xa0, 0xa0, 0xa0));
            painter->drawLine(QPointF(area.left(), y), QPointF(area.right(), y));
        }
    }
    painter->restore();
}

void ModeSummaryTable::paintEvent(QPaintEvent *)
{
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setRenderHint(QPainter::TextAntialiasing);
    renderTo(&painter, QRectF(rect()));
}

// ---------------------------------------------------------------------------

ModeComparisonView::ModeComparisonView(QWidget *parent)
    : QWidget(parent)
    , m_heading(new QLabel(this))
    , m_byTime(new ModeLossChart(ModeLossChart::Axis::WallTime, this))
    , m_byStep(new ModeLossChart(ModeLossChart::Axis::GlobalStep, this))
    , m_heldOut(new ModeHeldOutChart(ModeHeldOutChart::Axis::WallTime, this))
    , m_heldOutByStep(new ModeHeldOutChart(ModeHeldOutChart::Axis::GlobalStep, this))
    , m_staleness(new ModeStalenessChart(this))
    , m_timeToTarget(new ModeBarChart(ModeBarChart::Figure::TimeToTarget, this))
    , m_stepsPerSecond(new ModeBarChart(ModeBarChart::Figure::WorkerStepsPerSecond, this))
    , m_waitFraction(new ModeBarChart(ModeBarChart::Figure::WorkerWaitFraction, this))
    , m_table(new ModeSummaryTable(this))
{
    m_heading->setWordWrap(true);
    m_heading->setTextFormat(Qt::RichText);
    m_heading->setObjectName(QStringLiteral("modeComparisonHeading"));
    auto *grid = new QGridLayout;
    grid->setContentsMargins(0, 0, 0, 0);
    // The pace in the first row, its price in the second (what was learned
    // by time and by step, how stale), the rest in the third.
    const QList<QWidget *> widgets{m_byTime,    m_byStep, m_timeToTarget,   m_heldOut,     m_heldOutByStep,
                                   m_staleness, m_table,  m_stepsPerSecond, m_waitFraction};
    for (int i = 0; i < widgets.size(); ++i) {
        widgets[i]->setMinimumSize(320, 240);
        grid->addWidget(widgets[i], i / 3, i % 3);
        grid->setColumnStretch(i % 3, 1);
        grid->setRowStretch(i / 3, 1);
    }
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(m_heading);
    layout->addLayout(grid, 1);
}

QList<ExportableChart *> ModeComparisonView::panels() const
{
    return {m_byTime,    m_byStep, m_timeToTarget,   m_heldOut,     m_heldOutByStep,
            m_staleness, m_table,  m_stepsPerSecond, m_waitFraction};
}

void ModeComparisonView::setSummary(const ModeComparisonSummary &summary)
{
    m_summary = std::make_shared<const ModeComparisonSummary>(summary);
    m_byTime->setSummary(m_summary);
    m_byStep->setSummary(m_summary);
    m_heldOut->setSummary(m_summary);
    m_heldOutByStep->setSummary(m_summary);
    m_staleness->setSummary(m_summary);
    m_timeToTarget->setSummary(m_summary);
    m_stepsPerSecond->setSummary(m_summary);
    m_waitFraction->setSummary(m_summary);
    m_table->setSummary(m_summary);
    m_heading->setText(QStringLiteral("<b>%1</b><br>%2<br>%3")
                           .arg(title().toHtmlEscaped(), m_setting.toHtmlEscaped(),
                                modeComparisonVerdict(*m_summary).toHtmlEscaped()));
}

void ModeComparisonView::setHeldOutMetric(const QString &metric)
{
    m_heldOut->setMetric(metric);
    m_heldOutByStep->setMetric(metric);
}

void ModeComparisonView::setSetting(const QString &setting)
{
    m_setting = setting;
    if (m_summary)
        setSummary(*m_summary);
    else
        m_heading->setText(setting.toHtmlEscaped());
}

QString ModeComparisonView::title() const
{
    QStringList modes;
    size_t seeds = 1;
    if (m_summary) {
        for (const ContenderSpread &contender : contenderSpreads(*m_summary)) {
            modes << modeRunLabel(m_summary->runs[contender.runs.front()]);
            seeds = std::max(seeds, contender.runs.size());
        }
    }
    if (modes.isEmpty())
        return tr("Update modes compared");
    return seeds > 1 ? tr("Update modes compared: %1, %2 seeds each").arg(modes.join(QStringLiteral(", "))).arg(seeds)
                     : tr("Update modes compared: %1, one run each").arg(modes.join(QStringLiteral(", ")));
}

void ModeComparisonView::renderTo(QPainter *painter, const QRectF &target)
{
    painter->save();
    painter->fillRect(target, Qt::white);
    painter->translate(target.topLeft());
    const QSizeF size = target.size();
    const double margin = size.width() * 0.012;
    // Text sized by the figure's width as much as its height: a taller
    // figure (more panel rows) keeps the title of a wide one.
    const double textScale = std::min(size.height(), size.width() * 1050 / 1800);
    QFont titleFont = painter->font();
    titleFont.setBold(true);
    titleFont.setPixelSize(std::max(12, int(textScale * 0.026)));
    QFont textFont = titleFont;
    textFont.setBold(false);
    textFont.setPixelSize(std::max(10, int(textScale * 0.017)));
    painter->setPen(Qt::black);
    double y = margin;
    painter->setFont(titleFont);
    const double titleHeight = titleFont.pixelSize() * 1.4;
    painter->drawText(QRectF(margin, y, size.width() - 2 * margin, titleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                      title());
    y += titleHeight;
    painter->setFont(textFont);
    const double lineHeight = textFont.pixelSize() * 1.45;
    painter->drawText(QRectF(margin, y, size.width() - 2 * margin, lineHeight), Qt::AlignLeft | Qt::AlignVCenter,
                      painter->fontMetrics().elidedText(m_setting, Qt::ElideRight, int(size.width() - 2 * margin)));
    y += lineHeight;
    // The verdict wraps (over seeds it names each difference beyond the
    // spread), up to three lines.
    if (m_summary) {
        const QRectF box(margin, y, size.width() - 2 * margin, 3 * lineHeight);
        const QString verdict = modeComparisonVerdict(*m_summary);
        const QRectF used = painter->boundingRect(box, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, verdict);
        painter->drawText(box, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, verdict);
        y += std::min(box.height(), used.height()) + lineHeight * 0.2;
    }
    y += margin / 2;
    // Panels laid out as for cells about 600 px wide, scaled into the cells:
    // their labels then read at any export size.
    const QList<ExportableChart *> cells = panels();
    const double gap = margin;
    const double cellWidth = (size.width() - 2 * margin - 2 * gap) / 3;
    const int rows = int((cells.size() + 2) / 3);
    const double cellHeight = (size.height() - y - margin - (rows - 1) * gap) / rows;
    const double zoom = cellWidth / 600;
    for (int i = 0; i < cells.size(); ++i) {
        const int row = i / 3; // three panels a row
        const int column = i % 3;
        const QRectF cell(margin + column * (cellWidth + gap), y + row * (cellHeight + gap), cellWidth, cellHeight);
        ChartExporter::paintScaled(painter, cells[i], cell, zoom);
        painter->setPen(QColor(0xd8, 0xd8, 0xd8));
        painter->drawRect(cell);
    }
    painter->restore();
}

CsvTable ModeComparisonView::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("mode"), QStringLiteral("seconds_since_first_step"), QStringLiteral("global_step"),
                    QStringLiteral("full_loss")};
    if (!m_summary)
        return table;
    for (const ModeRunSummary &run : m_summary->runs)
        for (const LossPoint &p : run.loss)
            table.rows.push_back({run.name, QString::number(p.seconds, 'f', 3), QString::number(p.globalStep),
                                  QString::number(p.loss, 'g', 8)});
    return table;
}

int ModeComparisonView::pointCount() const
{
    int count = 0;
    for (ExportableChart *panel : panels())
        count += panel->pointCount();
    return count;
}

// ---------------------------------------------------------------------------

QString describeComparisonSetting(const ClusterPlan &plan, const std::vector<uint64_t> &seeds)
{
    // Workers grouped by pace: "worker:0 20 ms, worker:1 60 ms a step".
    std::map<std::pair<int, int>, QStringList> byPace;
    float jitter = plan.training.pace.computeJitter;
    for (int i = 0; i < plan.cluster.numWorkers(); ++i) {
        const WorkerPace pace = plan.paceOf(i);
        byPace[{pace.computeMs, pace.stragglerMs}] << workerName(i);
        jitter = std::max(jitter, pace.computeJitter);
    }
    QStringList paces;
    for (const auto &[pace, workers] : byPace) {
        const QString time = pace.first > 0 ? QObject::tr("%1 ms").arg(pace.first) : QObject::tr("full speed");
        const QString delay = pace.second > 0 ? QObject::tr(" + %1 ms delay").arg(pace.second) : QString();
        // Past a few, the workers of one pace are counted, not named.
        const QString who
            = workers.size() > 3 ? QObject::tr("%1 workers").arg(workers.size()) : workers.join(QStringLiteral(", "));
        paces << who + QLatin1Char(' ') + time + delay;
    }
    QStringList seedTexts;
    for (const uint64_t seed : seeds)
        seedTexts << QString::number(seed);
    const QString seedText = seeds.size() > 1    ? QObject::tr("seeds %1").arg(seedTexts.join(QStringLiteral(", ")))
                             : seeds.size() == 1 ? QObject::tr("seed %1").arg(seeds.front())
                                                 : QObject::tr("seed %1").arg(plan.training.seed);
    return QObject::tr("%1 ps, %2 workers; compute per step: %3 (jitter %4); %5 model, learning rate %6, batch %7, "
                       "%8")
        .arg(plan.cluster.numPs())
        .arg(plan.cluster.numWorkers())
        .arg(paces.join(QStringLiteral("; ")))
        .arg(double(jitter))
        .arg(QString::fromStdString(plan.training.model))
        .arg(double(plan.training.learningRate))
        .arg(plan.training.batchSize)
        .arg(seedText);
}

CsvTable modeComparisonTable(const ModeComparisonSummary &summary)
{
    CsvTable table;
    const std::vector<int> workers = workerIndices(summary);
    table.header = {QStringLiteral("mode"), QStringLiteral("target"), QStringLiteral("time_to_target_s"),
                    QStringLiteral("final_loss"), QStringLiteral("global_steps_per_s")};
    for (const int index : workers)
        table.header << QStringLiteral("worker%1_steps_per_s").arg(index)
                     << QStringLiteral("worker%1_wait_fraction").arg(index);
    table.header << QStringLiteral("staleness") << QStringLiteral("global_step_at_target")
                 << QStringLiteral("run_seconds") << QStringLiteral("ended") << QStringLiteral("failure")
                 << QStringLiteral("run_directory");
    // The price of each mode's pace: how stale its applied gradients were,
    // and what the model learned (the held-out metrics any run logged).
    table.header << QStringLiteral("mode_spec") << QStringLiteral("staleness_median") << QStringLiteral("staleness_p90")
                 << QStringLiteral("staleness_max") << QStringLiteral("staleness_mean")
                 << QStringLiteral("staleness_probes") << QStringLiteral("probe_cosine_median");
    const QStringList metricNames = heldOutMetricNames(summary);
    for (const QString &name : metricNames)
        table.header << QStringLiteral("final_") + name;
    table.header << QStringLiteral("seed");
    for (const ModeRunSummary &run : summary.runs) {
        QStringList row{run.name, QString::number(summary.targetLoss, 'g', 9),
                        run.secondsToTarget ? QString::number(*run.secondsToTarget, 'f', 3) : QString(),
                        std::isfinite(run.finalLoss) ? QString::number(run.finalLoss, 'g', 6) : QString(),
                        QString::number(run.globalStepsPerSecond, 'f', 2)};
        for (const int index : workers) {
            const WorkerStepFigures *worker = workerOf(run, index);
            row << (worker ? QString::number(worker->stepsPerSecond, 'f', 2) : QString())
                << (worker ? QString::number(worker->waitFraction, 'f', 4) : QString());
        }
        const UpdateModeInfo *mode = findUpdateMode(run.mode.mode());
        row << (mode && mode->knobs.staleness ? QString::number(run.mode.staleness()) : QString())
            << (run.secondsToTarget ? QString::number(run.globalStepAtTarget) : QString())
            << QString::number(run.seconds, 'f', 3) << run.stopReason << oneLine(run.failure)
            << QDir::toNativeSeparators(run.directory);
        const bool hasStaleness = run.staleness.gradients > 0;
        row << (run.mode.mode() == proto::UPDATE_MODE_UNSPECIFIED ? QString() : qs(modeSpec(run.mode)))
            << (hasStaleness ? QString::number(run.staleness.quantile(0.5)) : QString())
            << (hasStaleness ? QString::number(run.staleness.quantile(0.9)) : QString())
            << (hasStaleness ? QString::number(run.staleness.max) : QString())
            << (hasStaleness ? QString::number(run.staleness.mean, 'f', 3) : QString());
        // What its gradients were worth against fresh ones, over every probe.
        const std::optional<float> cosine = run.stalenessCost.medianCosineFrom(0);
        row << QString::number(run.stalenessCost.count())
            << (cosine ? QString::number(double(*cosine), 'g', 4) : QString());
        for (const QString &name : metricNames) {
            const double value = run.finalMetric(name);
            row << (std::isfinite(value) ? QString::number(value, 'g', 6) : QString());
        }
        row << QString::number(run.seed);
        table.rows.push_back(row);
    }
    return table;
}

CsvTable contenderSpreadCsv(const ModeComparisonSummary &summary)
{
    CsvTable table;
    table.header = {QStringLiteral("mode"), QStringLiteral("mode_spec"), QStringLiteral("runs"),
                    QStringLiteral("seeds"), QStringLiteral("reached_target")};
    const QStringList metricNames = heldOutMetricNames(summary);
    QStringList figures{QStringLiteral("time_to_target_s"), QStringLiteral("global_step_at_target"),
                        QStringLiteral("final_loss"), QStringLiteral("global_steps_per_s"),
                        QStringLiteral("staleness_median")};
    for (const QString &name : metricNames)
        figures << QStringLiteral("final_") + name;
    for (const QString &figure : figures)
        table.header << figure + QStringLiteral("_median") << figure + QStringLiteral("_min")
                     << figure + QStringLiteral("_max");
    const auto number = [](double value) { return std::isfinite(value) ? QString::number(value, 'g', 6) : QString(); };
    for (const ContenderSpread &c : contenderSpreads(summary)) {
        const ModeRunSummary &first = summary.runs[c.runs.front()];
        QStringList row{c.name, first.mode.mode() == proto::UPDATE_MODE_UNSPECIFIED ? QString() : qs(modeSpec(c.mode)),
                        QString::number(c.runs.size()), seedList(c).replace(QStringLiteral(", "), QStringLiteral(" ")),
                        QString::number(c.secondsToTarget.values)};
        std::vector<Spread> spreads{c.secondsToTarget, c.globalStepAtTarget, c.finalLoss, c.globalStepsPerSecond,
                                    c.stalenessMedian};
        for (const QString &name : metricNames) {
            const auto it = c.finalMetrics.find(name);
            spreads.push_back(it == c.finalMetrics.end() ? Spread{} : it->second);
        }
        for (const Spread &spread : spreads)
            row << number(spread.median) << number(spread.low) << number(spread.high);
        table.rows.push_back(row);
    }
    return table;
}

bool exportModeComparison(ModeComparisonView *view, const QString &directory, QStringList *written, QString *error)
{
    // The figure as the charts are exported; its CSVs are its own.
    if (!ChartExporter::exportAll({view}, directory, nullptr, written, error,
                                  ChartExporter::Png | ChartExporter::Svg | ChartExporter::Pdf))
        return false;
    if (!view->summary())
        return true;
    const QDir dir(directory);
    const auto note = [written](const QString &path) {
        if (written)
            written->append(path);
    };
    const QString table = dir.filePath(QStringLiteral("comparison.csv"));
    if (!ChartExporter::writeCsv(modeComparisonTable(*view->summary()), table, error))
        return false;
    note(table);
    const QString series = dir.filePath(QStringLiteral("mode_comparison_series.csv"));
    if (!ChartExporter::writeCsv(view->csv(), series, error))
        return false;
    note(series);
    // Over seeds, each contender's figures as median and range, one row each.
    if (repeatedOverSeeds(*view->summary())) {
        const QString spreads = dir.filePath(QStringLiteral("comparison_spread.csv"));
        if (!ChartExporter::writeCsv(contenderSpreadCsv(*view->summary()), spreads, error))
            return false;
        note(spreads);
    }
    return true;
}

namespace {

// One run a contender: who reached the target, in order, and what each
// model learned.
QString singleRunVerdict(const ModeComparisonSummary &summary)
{
    std::vector<const ModeRunSummary *> reached;
    QStringList others;
    for (const ModeRunSummary &run : summary.runs) {
        if (run.secondsToTarget)
            reached.push_back(&run);
        else if (!run.failure.isEmpty())
            others << QObject::tr("%1 failed").arg(modeRunLabel(run));
        else if (run.inProgress)
            others << QObject::tr("%1 has not reached it yet (%2 so far)")
                          .arg(modeRunLabel(run), secondsText(run.seconds));
        else
            others << QObject::tr("%1 did not reach it in its %2 run").arg(modeRunLabel(run), secondsText(run.seconds));
    }
    std::stable_sort(reached.begin(), reached.end(), [](const ModeRunSummary *a, const ModeRunSummary *b) {
        return *a->secondsToTarget < *b->secondsToTarget;
    });
    QString text;
    if (reached.empty()) {
        text = QObject::tr("No mode reached a full loss of %1.").arg(lossText(summary.targetLoss));
    } else {
        text = QObject::tr("%1 reached a full loss of %2 first (%3)")
                   .arg(modeRunLabel(*reached.front()), lossText(summary.targetLoss),
                        secondsText(*reached.front()->secondsToTarget));
        for (size_t i = 1; i < reached.size(); ++i)
            text += QObject::tr(", then %1 (%2)")
                        .arg(modeRunLabel(*reached[i]), secondsText(*reached[i]->secondsToTarget));
        text += QLatin1Char('.');
    }
    if (!others.isEmpty())
        text += QLatin1Char(' ') + others.join(QStringLiteral("; ")) + QLatin1Char('.');
    // What each model learned, best first: the price of the pace above.
    const QString metric = heldOutMetric(summary);
    if (!metric.isEmpty()) {
        std::vector<std::pair<double, QString>> finals;
        for (const ModeRunSummary &run : summary.runs) {
            const double value = run.finalMetric(metric);
            if (std::isfinite(value))
                finals.emplace_back(value, modeRunLabel(run));
        }
        const bool higher = higherIsBetter(metric);
        std::stable_sort(finals.begin(), finals.end(), [higher](const auto &a, const auto &b) {
            return higher ? a.first > b.first : a.first < b.first;
        });
        QStringList parts;
        for (const auto &[value, label] : finals)
            parts << QStringLiteral("%1 %2").arg(label, QString::number(value, 'g', 3));
        if (!parts.isEmpty())
            text += QObject::tr(" Final %1, best first: %2.").arg(metricText(metric), parts.join(QStringLiteral(", ")));
    }
    return text;
}

} // namespace

QString modeComparisonVerdict(const ModeComparisonSummary &summary)
{
    QString text;
    if (repeatedOverSeeds(summary))
        text = spreadVerdict(summary);
    else
        text = singleRunVerdict(summary);
    if (summary.cancelled)
        text += QObject::tr(" (Cancelled before every mode ran.)");
    if (summary.runsToCome > 0)
        text = QObject::tr("So far: %1 %2 more to run.").arg(text).arg(summary.runsToCome);
    return text;
}

} // namespace parasync::ui
