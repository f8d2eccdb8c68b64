#include "chart_exporter.h"

#include "node_options.h"
#include "run_state.h"

#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QPainter>
#include <QSaveFile>
#include <QSvgGenerator>

namespace parasync::ui {

bool ChartExporter::exportPng(ExportableChart *chart, const QString &path, QString *error)
{
    const QSize size = chart->exportSize();
    QImage image(size, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        painter.setRenderHint(QPainter::TextAntialiasing);
        chart->renderTo(&painter, QRectF(QPointF(0, 0), QSizeF(size)));
    }
    if (!image.save(path, "PNG")) {
        if (error)
            *error = QObject::tr("Could not write %1: check that the folder exists and is writable.").arg(path);
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
    QPainter painter;
    if (!painter.begin(&generator)) {
        if (error)
            *error = QObject::tr("Could not write %1: check that the folder exists and is writable.").arg(path);
        return false;
    }
    painter.setRenderHint(QPainter::Antialiasing);
    painter.fillRect(QRect(QPoint(0, 0), size), Qt::white);
    chart->renderTo(&painter, QRectF(QPointF(0, 0), QSizeF(size)));
    painter.end();
    if (!QFileInfo(path).isFile() || QFileInfo(path).size() == 0) {
        if (error)
            *error = QObject::tr("Could not write %1.").arg(path);
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
        table.rows.push_back({QString::number(marker.globalStep),
                              QString::number(marker.wallTime - snapshot.startWallTime, 'f', 3),
                              QString::fromStdString(describeMode(marker.previous)),
                              QString::fromStdString(describeMode(marker.current)),
                              QString::fromStdString(marker.requestedBy)});
    }
    return table;
}

bool ChartExporter::exportAll(const QList<ExportableChart *> &charts, const QString &directory,
                              const RunSnapshot *snapshot, QStringList *written, QString *error, int formats)
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
