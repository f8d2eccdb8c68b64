#pragma once

// The one place that writes charts to files: PNG and SVG with title, legend
// and axis labels, and the series as CSV. Used by the desktop app's export
// actions and by the headless mode.

#include "exportable_chart.h"

#include <QString>
#include <QStringList>

namespace parasync {
struct RunSnapshot;
}

namespace parasync::ui {

class ChartExporter
{
public:
    enum Format { Png = 1, Svg = 2, Csv = 4, AllFormats = Png | Svg | Csv };

    // Each returns false with `error` saying which file and why.
    static bool exportPng(ExportableChart *chart, const QString &path, QString *error);
    static bool exportSvg(ExportableChart *chart, const QString &path, QString *error);
    static bool exportCsv(const ExportableChart *chart, const QString &path, QString *error);
    static bool writeCsv(const CsvTable &table, const QString &path, QString *error);

    // Writes `directory`/<name>.png/.svg/.csv for every chart (creating the
    // directory), plus mode_changes.csv when a snapshot is given. Appends the
    // paths written to `written`; stops at the first error.
    static bool exportAll(const QList<ExportableChart *> &charts, const QString &directory,
                          const RunSnapshot *snapshot, QStringList *written, QString *error,
                          int formats = AllFormats);

    // RFC 4180 quoting where needed.
    static QString csvField(const QString &text);
    static CsvTable modeChangeTable(const RunSnapshot &snapshot);
};

} // namespace parasync::ui
