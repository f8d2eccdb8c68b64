#include "ui/charts/chart_exporter.h"

#include "config/update_modes.h"
#include "orchestration/chrome_trace.h"
#include "orchestration/run_state.h"
#include "ui/models/chart_style.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPageLayout>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>

#include <array>
#include <cmath>

namespace parasync::ui {

namespace {

QString couldNotWrite(const QString &path)
{
    return QObject::tr("Could not write %1: check that the folder exists and is writable.").arg(path);
}

bool nonEmptyFile(const QString &path, QString *error)
{
    if (QFileInfo(path).isFile() && QFileInfo(path).size() > 0)
        return true;
    if (error)
        *error = couldNotWrite(path);
    return false;
}

// Paints `chart` at its export size onto `device`, on white: what PNG, SVG
// and PDF share. False when the device cannot be painted on (its file could
// not be opened).
bool paintChart(ExportableChart *chart, QPaintDevice *device)
{
    const QSize size = chart->exportSize();
    QPainter painter;
    if (!painter.begin(device))
        return false;
    painter.setRenderHint(QPainter::Antialiasing);
    painter.fillRect(QRect(QPoint(0, 0), size), Qt::white);
    chart->renderTo(&painter, QRectF(QPointF(0, 0), QSizeF(size)));
    painter.end();
    return true;
}

// The end of every vector export: the chart painted, the file there.
bool writeChart(ExportableChart *chart, QPaintDevice *device, const QString &path, QString *error)
{
    if (!paintChart(chart, device)) {
        if (error)
            *error = couldNotWrite(path);
        return false;
    }
    return nonEmptyFile(path, error);
}

// 72 dpi: one painter unit is one point, so a page of `layout` is as many
// units wide as it is points.
void setUpPdf(QPdfWriter &writer, const QString &title, const QPageLayout &layout)
{
    writer.setTitle(title);
    writer.setCreator(QStringLiteral("Parasync"));
    writer.setResolution(72);
    writer.setPageLayout(layout);
}

QString number(double value, int precision = 4)
{
    return std::isfinite(value) ? QString::number(value, 'g', precision) : QStringLiteral("–");
}

// The report's text column: headed sections of short lines.
struct ReportSection
{
    QString heading;
    QStringList lines;
    // Lines are items (flags) packed side by side as the column's width
    // allows, never broken inside one.
    bool packed = false;
};

std::vector<ReportSection> reportSections(const RunSnapshot &snapshot)
{
    std::vector<ReportSection> sections;
    ReportSection cluster{QObject::tr("Cluster"), {}};
    QStringList ps, workers;
    for (const auto &host : snapshot.psHosts)
        ps << QString::fromStdString(host);
    for (const auto &host : snapshot.workerHosts)
        workers << QString::fromStdString(host);
    cluster.lines << QObject::tr("ps (%1): %2")
                         .arg(ps.size())
                         .arg(ps.isEmpty() ? QStringLiteral("–") : ps.join(QStringLiteral(", ")));
    cluster.lines << QObject::tr("workers (%1): %2")
                         .arg(workers.size())
                         .arg(workers.isEmpty() ? QStringLiteral("–") : workers.join(QStringLiteral(", ")));
    if (!snapshot.signature.model().empty())
        cluster.lines << QObject::tr("model: %1, optimizer %2")
                             .arg(QString::fromStdString(snapshot.signature.model()),
                                  QString::fromStdString(snapshot.signature.optimizer()));
    sections.push_back(cluster);

    ReportSection flags{QObject::tr("Flags"), {}, true};
    const QJsonObject training = QJsonDocument::fromJson(QByteArray::fromStdString(snapshot.trainingJson)).object();
    for (auto it = training.begin(); it != training.end(); ++it) {
        const QJsonValue value = it.value();
        if (value.isString() && value.toString().isEmpty())
            continue; // unset (e.g. --dataset: the model's default)
        const QString text
            = value.isString() ? value.toString()
              : value.isBool() ? (value.toBool() ? QStringLiteral("true") : QStringLiteral("false"))
              : value.isDouble()
                  ? QString::number(value.toDouble(), 'g', 8)
                  : QString::fromUtf8(QJsonDocument(QJsonObject{{it.key(), value}}).toJson(QJsonDocument::Compact));
        flags.lines << QStringLiteral("--%1=%2").arg(it.key(), text);
    }
    if (flags.lines.isEmpty())
        flags.lines << QObject::tr("(not recorded)");
    sections.push_back(flags);

    ReportSection modes{QObject::tr("Mode changes"), {}};
    modes.lines << QObject::tr("started in %1")
                       .arg(QString::fromStdString(describeMode(
                           snapshot.modeChanges.empty() ? snapshot.mode : snapshot.modeChanges.front().previous)));
    constexpr size_t kShownChanges = 8;
    for (size_t i = 0; i < snapshot.modeChanges.size() && i < kShownChanges; ++i) {
        const auto &m = snapshot.modeChanges[i];
        modes.lines
            << QObject::tr("step %1: %2").arg(m.globalStep).arg(QString::fromStdString(describeMode(m.current)));
    }
    if (snapshot.modeChanges.size() > kShownChanges)
        modes.lines << QObject::tr("… and %1 more (mode_changes.csv)").arg(snapshot.modeChanges.size() - kShownChanges);
    sections.push_back(modes);

    ReportSection figures{QObject::tr("Final figures"), {}};
    figures.lines << QObject::tr("global step %1%2%3")
                         .arg(snapshot.globalStep)
                         .arg(snapshot.lastStep > 0 ? QObject::tr(" of %1").arg(snapshot.lastStep) : QString())
                         .arg(snapshot.finished ? QObject::tr(", finished") : QString());
    if (!snapshot.fullLoss.isEmpty())
        figures.lines
            << QObject::tr("full-shard loss (chief): %1").arg(number(snapshot.fullLoss.buckets().back().last));
    // The held-out score tells learning from memorising.
    if (const QStringList metrics = latestMetricTexts(snapshot); !metrics.isEmpty())
        figures.lines << QObject::tr("reported metrics, newest: %1").arg(metrics.join(QStringLiteral(", ")));
    QStringList parameters;
    for (size_t i = 0; i < snapshot.parameterNames.size() && i < snapshot.parameterSeries.size(); ++i)
        if (!snapshot.parameterSeries[i].isEmpty())
            parameters << QStringLiteral("%1 = %2").arg(QString::fromStdString(snapshot.parameterNames[i]),
                                                        number(snapshot.parameterSeries[i].buckets().back().last, 6));
    if (!parameters.isEmpty())
        figures.lines << parameters.join(QStringLiteral(", "));
    if (snapshot.lastWallTime > snapshot.startWallTime && snapshot.startWallTime > 0)
        figures.lines << QObject::tr("%1 s of training").arg(number(snapshot.lastWallTime - snapshot.startWallTime, 3));
    for (const auto &w : snapshot.workers)
        figures.lines << QObject::tr("worker:%1: %2 applied, %3 dropped, waited %4 %")
                             .arg(w.index)
                             .arg(w.applied)
                             .arg(w.dropped)
                             .arg(number(100 * w.waitFraction, 3));
    if (snapshot.droppedTotal > 0)
        figures.lines << QObject::tr("dropped as stale, all workers: %1").arg(snapshot.droppedTotal);
    sections.push_back(figures);
    return sections;
}

} // namespace

void ChartExporter::paintScaled(QPainter *painter, ExportableChart *chart, const QRectF &cell, double zoom)
{
    const QSizeF logical = cell.size() / zoom;
    painter->save();
    painter->translate(cell.topLeft());
    painter->scale(zoom, zoom);
    painter->setClipRect(QRectF(QPointF(0, 0), logical));
    painter->fillRect(QRectF(QPointF(0, 0), logical), Qt::white);
    chart->renderTo(painter, QRectF(QPointF(0, 0), logical));
    painter->restore();
}

bool ChartExporter::exportPng(ExportableChart *chart, const QString &path, QString *error)
{
    QImage image(chart->exportSize(), QImage::Format_ARGB32_Premultiplied);
    if (!paintChart(chart, &image) || !image.save(path, "PNG")) {
        if (error)
            *error = couldNotWrite(path);
        return false;
    }
    return true;
}

bool ChartExporter::exportSvg(ExportableChart *chart, const QString &path, QString *error)
{
    const QSize size = chart->exportSize();
    QSvgGenerator generator;
    generator.setFileName(path);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setTitle(chart->title());
    generator.setDescription(QObject::tr("Exported by Parasync"));
    return writeChart(chart, &generator, path, error);
}

bool ChartExporter::exportPdf(ExportableChart *chart, const QString &path, QString *error)
{
    QPdfWriter writer(path);
    // One page the chart's size.
    setUpPdf(writer, chart->title(),
             QPageLayout(QPageSize(QSizeF(chart->exportSize()), QPageSize::Point), QPageLayout::Portrait, QMarginsF()));
    return writeChart(chart, &writer, path, error);
}

bool ChartExporter::exportRunReport(const QList<ExportableChart *> &charts, const RunSnapshot &snapshot,
                                    const QString &runName, const QString &path, QString *error)
{
    QPdfWriter writer(path);
    setUpPdf(writer, QObject::tr("Parasync run report"),
             QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Landscape, QMarginsF()));
    QPainter painter;
    if (!painter.begin(&writer)) {
        if (error)
            *error = couldNotWrite(path);
        return false;
    }
    painter.setRenderHint(QPainter::Antialiasing);
    const QRectF page(QPointF(0, 0), QSizeF(writer.pageLayout().fullRectPoints().size()));
    const QRectF content = page.adjusted(24, 20, -24, -20);

    QFont titleFont = painter.font();
    titleFont.setPointSizeF(15);
    titleFont.setBold(true);
    painter.setFont(titleFont);
    painter.setPen(Qt::black);
    const QString title
        = QObject::tr("Parasync run report") + (runName.isEmpty() ? QString() : QStringLiteral(" — ") + runName);
    painter.drawText(QRectF(content.left(), content.top(), content.width(), 22), Qt::AlignLeft | Qt::AlignVCenter,
                     painter.fontMetrics().elidedText(title, Qt::ElideMiddle, int(content.width() - 150)));
    QFont small = painter.font();
    small.setPointSizeF(7.5);
    small.setBold(false);
    painter.setFont(small);
    painter.drawText(QRectF(content.left(), content.top(), content.width(), 22), Qt::AlignRight | Qt::AlignVCenter,
                     QDateTime::currentDateTime().toString(Qt::ISODate));

    // A band of text columns (cluster, flags, mode changes, final figures)
    // under the title, then every chart in a grid filling the rest.
    const std::vector<ReportSection> sections = reportSections(snapshot);
    const std::array<double, 4> shares{0.25, 0.37, 0.15, 0.23};
    QFont heading = small;
    heading.setPointSizeF(9);
    heading.setBold(true);
    const double bandTop = content.top() + 28;
    double bandBottom = bandTop;
    double x = content.left();
    for (size_t i = 0; i < sections.size(); ++i) {
        const ReportSection &section = sections[i];
        const double width = content.width() * (i < shares.size() ? shares[i] : 0.2) - 12;
        double y = bandTop;
        painter.setFont(heading);
        painter.drawText(QRectF(x, y, width, 13), Qt::AlignLeft | Qt::AlignVCenter, section.heading);
        y += 14;
        painter.setFont(small);
        QStringList lines = section.lines;
        if (section.packed) {
            // Pack whole items into lines as wide as the column.
            lines.clear();
            QString line;
            for (const QString &item : section.lines) {
                const QString longer = line.isEmpty() ? item : line + QStringLiteral("  ") + item;
                if (!line.isEmpty() && painter.fontMetrics().horizontalAdvance(longer) > width - 4) {
                    lines << line;
                    line = item;
                } else {
                    line = longer;
                }
            }
            if (!line.isEmpty())
                lines << line;
        }
        for (const QString &line : lines) {
            const QRectF box(x + 2, y, width - 2, 200);
            const QRectF used = painter.boundingRect(box, Qt::AlignLeft | Qt::TextWordWrap, line);
            painter.drawText(box, Qt::AlignLeft | Qt::TextWordWrap, line);
            y += used.height() + 1;
        }
        bandBottom = std::max(bandBottom, y);
        x += width + 12;
    }

    const double gap = 8;
    const QRectF chartArea(content.left(), bandBottom + 10, content.width(), content.bottom() - (bandBottom + 10));
    // The grid whose cells hold the largest chart of a chart's usual shape
    // (about 1.9 : 1); each chart fills its cell.
    constexpr double kAspect = 1.9;
    int columns = 1;
    double best = 0;
    for (int c = 1; c <= 4 && !charts.isEmpty(); ++c) {
        const int r = int((charts.size() + c - 1) / c);
        const double w = (chartArea.width() - gap * (c - 1)) / c;
        const double h = (chartArea.height() - gap * (r - 1)) / r;
        const double fit = std::min(w, h * kAspect);
        if (fit > best) {
            best = fit;
            columns = c;
        }
    }
    const int rows = std::max(1, int((charts.size() + columns - 1) / columns));
    const double cellWidth = (chartArea.width() - gap * (columns - 1)) / columns;
    const double cellHeight = (chartArea.height() - gap * (rows - 1)) / rows;
    // Laid out as for a window of about twice the cell's size (see
    // paintScaled): the charts' 8-9 px labels print at about 4.5 pt, which
    // reads on paper and, the page being vectors, zooms without blur.
    constexpr double kZoom = 0.55;
    for (int i = 0; i < int(charts.size()); ++i) {
        const QRectF cell(chartArea.left() + (i % columns) * (cellWidth + gap),
                          chartArea.top() + (i / columns) * (cellHeight + gap), cellWidth, cellHeight);
        paintScaled(&painter, charts[i], cell, kZoom);
        painter.setPen(QColor(0xd0, 0xd0, 0xd0));
        painter.drawRect(cell);
    }
    painter.end();
    return nonEmptyFile(path, error);
}

bool ChartExporter::exportTrace(const RunSnapshot &snapshot, const QString &path, QString *error)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(QByteArray::fromStdString(chromeTraceJson(snapshot))) < 0
        || !file.commit()) {
        if (error)
            *error = QObject::tr("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    return true;
}

QString ChartExporter::csvField(const QString &text)
{
    if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) && !text.contains(QLatin1Char('\n')))
        return text;
    QString quoted = text;
    quoted.replace(QStringLiteral("\""), QStringLiteral("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

bool ChartExporter::writeCsv(const CsvTable &table, const QString &path, QString *error)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
        if (error)
            *error = QObject::tr("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    const auto writeRow = [&file](const QStringList &fields) {
        QString line;
        for (qsizetype i = 0; i < fields.size(); ++i) {
            if (i > 0)
                line += QLatin1Char(',');
            line += csvField(fields[i]);
        }
        line += QLatin1Char('\n');
        file.write(line.toUtf8());
    };
    writeRow(table.header);
    for (const auto &row : table.rows)
        writeRow(row);
    if (!file.commit()) {
        if (error)
            *error = QObject::tr("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    return true;
}

bool ChartExporter::exportCsv(const ExportableChart *chart, const QString &path, QString *error)
{
    return writeCsv(chart->csv(), path, error);
}

CsvTable ChartExporter::modeChangeTable(const RunSnapshot &snapshot)
{
    CsvTable table;
    table.header = {QStringLiteral("global_step"), QStringLiteral("seconds_since_start"), QStringLiteral("previous"),
                    QStringLiteral("current"), QStringLiteral("requested_by")};
    for (const auto &marker : snapshot.modeChanges) {
        table.rows.push_back(
            {QString::number(marker.globalStep), QString::number(marker.wallTime - snapshot.startWallTime, 'f', 3),
             QString::fromStdString(describeMode(marker.previous)),
             QString::fromStdString(describeMode(marker.current)), QString::fromStdString(marker.requestedBy)});
    }
    return table;
}

bool ChartExporter::exportAll(const QList<ExportableChart *> &charts, const QString &directory,
                              const RunSnapshot *snapshot, QStringList *written, QString *error, int formats,
                              const QString &runName)
{
    if (!QDir().mkpath(directory)) {
        if (error)
            *error = QObject::tr("Could not create the folder %1: check the path and its permissions.").arg(directory);
        return false;
    }
    const QDir dir(directory);
    const auto note = [written](const QString &path) {
        if (written)
            written->append(path);
    };
    for (ExportableChart *chart : charts) {
        const QString base = dir.filePath(chart->exportName());
        if (formats & Png) {
            if (!exportPng(chart, base + QStringLiteral(".png"), error))
                return false;
            note(base + QStringLiteral(".png"));
        }
        if (formats & Svg) {
            if (!exportSvg(chart, base + QStringLiteral(".svg"), error))
                return false;
            note(base + QStringLiteral(".svg"));
        }
        if (formats & Csv) {
            if (!exportCsv(chart, base + QStringLiteral(".csv"), error))
                return false;
            note(base + QStringLiteral(".csv"));
        }
        if (formats & Pdf) {
            if (!exportPdf(chart, base + QStringLiteral(".pdf"), error))
                return false;
            note(base + QStringLiteral(".pdf"));
        }
    }
    if (snapshot && (formats & Pdf)) {
        const QString path = dir.filePath(QStringLiteral("run_report.pdf"));
        if (!exportRunReport(charts, *snapshot, runName, path, error))
            return false;
        note(path);
    }
    if (snapshot && (formats & Trace)) {
        const QString path = dir.filePath(QStringLiteral("trace.json"));
        if (!exportTrace(*snapshot, path, error))
            return false;
        note(path);
    }
    if (snapshot && (formats & Csv)) {
        const QString path = dir.filePath(QStringLiteral("mode_changes.csv"));
        if (!writeCsv(modeChangeTable(*snapshot), path, error))
            return false;
        note(path);
    }
    return true;
}

} // namespace parasync::ui
