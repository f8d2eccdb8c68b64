#pragma once

// The one place that writes charts to files: PNG, SVG and vector PDF with
// title, legend and axis labels, the series as CSV, a one-page run report
// (PDF) and the step timeline as Chrome Trace Event JSON. Used by the
// desktop app's export actions and by the headless mode.

#include "ui/charts/exportable_chart.h"

#include <QString>
#include <QStringList>

namespace parasync {
struct RunSnapshot;
}

namespace parasync::ui {

class ChartExporter
{
public:
    // Pdf also writes run_report.pdf, Trace the step timeline's trace.json,
    // when exportAll is given a snapshot.
    enum Format { Png = 1, Svg = 2, Csv = 4, Pdf = 8, Trace = 16, AllFormats = Png | Svg | Csv | Pdf | Trace };

    // Each returns false with `error` saying which file and why.
    static bool exportPng(ExportableChart *chart, const QString &path, QString *error);
    static bool exportSvg(ExportableChart *chart, const QString &path, QString *error);
    static bool exportCsv(const ExportableChart *chart, const QString &path, QString *error);
    // One page the size of the chart, drawn as vectors (text stays text).
    static bool exportPdf(ExportableChart *chart, const QString &path, QString *error);
    // One landscape A4 page: a band with the cluster, the training flags,
    // the mode changes and the final figures of the run, then every chart in
    // a grid, each laid out for its cell so that its labels stay legible. `runName` heads
    // the page (a run directory, "live run").
    static bool exportRunReport(const QList<ExportableChart *> &charts, const RunSnapshot &snapshot,
                                const QString &runName, const QString &path, QString *error);
    // The step timeline as Chrome Trace Event JSON (see core/chrome_trace.h).
    static bool exportTrace(const RunSnapshot &snapshot, const QString &path, QString *error);
    static bool writeCsv(const CsvTable &table, const QString &path, QString *error);

    // Writes `directory`/<name>.png/.svg/.csv/.pdf for every chart (creating
    // the directory), plus, when a snapshot is given, mode_changes.csv,
    // run_report.pdf and trace.json. Appends the
    // paths written to `written`; stops at the first error.
    static bool exportAll(const QList<ExportableChart *> &charts, const QString &directory, const RunSnapshot *snapshot,
                          QStringList *written, QString *error, int formats = AllFormats, const QString &runName = {});

    // Paints `chart` laid out for a box of cell/zoom pixels, scaled by `zoom`
    // into `cell`: a chart laid out for a small box keeps its text large
    // relative to its plot, where scaling a full-size export down would
    // leave unreadable labels. The run report's grid and the mode
    // comparison's figure draw their panels so.
    static void paintScaled(QPainter *painter, ExportableChart *chart, const QRectF &cell, double zoom);

    // RFC 4180 quoting where needed.
    static QString csvField(const QString &text);
    static CsvTable modeChangeTable(const RunSnapshot &snapshot);
};

} // namespace parasync::ui
