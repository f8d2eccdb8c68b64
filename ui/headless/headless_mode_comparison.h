#pragma once

// `parasync --headless --compare_modes`: runs a ModeComparison without a
// window, prints a progress line every few seconds and, at the end, a table
// of the results, and writes the comparison figure (PNG, SVG, PDF),
// comparison.csv and the loss series into the export folder, beside the
// three run directories. Finishes with an exit code a script can test.
// Main thread (it runs the event loop); nothing here blocks it.

#include "orchestration/mode_comparison.h"

#include <QObject>
#include <QStringList>

#include <memory>

class QCommandLineParser;

namespace parasync::ui {

class ModeComparisonView;

// What `parasync --compare_modes` asks for: `plan` (the demo, or the
// cluster file, with the command line's training flags) with the
// comparison's defaults (withComparisonDefaults) where the command line
// says nothing -- its pace flags, --last_step or a cluster file's per-worker
// pace win -- plus --workload's contenders, target and run time, then
// --modes (the contenders, default comparedModes), --compare_full_time,
// --compare_seconds (per mode), --target_loss (default: defaultTargetLoss)
// --seeds (default: the workload's seeds unless --seed is given, else once)
// and --export (the output folder; empty when not given). Throws InputError
// naming the flag to fix.
ModeComparisonOptions modeComparisonOptionsFromArguments(const QCommandLineParser &parser, const ClusterPlan &plan);
// --seeds' value ("1,2,3"); throws InputError saying what to write.
std::vector<uint64_t> parseSeedList(const QString &value);
// Throws InputError when a flag that only --compare_modes reads (--modes,
// --compare_seconds, --target_loss, --compare_full_time, --seeds) is given without it: ignored, it would
// leave the user wondering why nothing changed.
void refuseComparisonFlagsAlone(const QCommandLineParser &parser);

// The time limit per mode when none is given: the default runs take 5-20 s
// each to the target on the machine they were tuned on; the rest is room
// for a loaded machine.
constexpr int kDefaultCompareSeconds = 40;

class HeadlessModeComparison : public QObject
{
    Q_OBJECT

public:
    enum ExitCode { Success = 0, RunFailed = 1, CouldNotStart = 2 };

    explicit HeadlessModeComparison(ModeComparisonOptions options, QObject *parent = nullptr);
    ~HeadlessModeComparison() override;

    void setNodeBinary(const QString &path);
    // Begins; `finished` follows (at once when the options are refused).
    void start();
    QStringList written() const { return m_written; }
    ModeComparison *comparison() const { return m_comparison; }
    // The figure it exported (never shown).
    ModeComparisonView *view() const { return m_view.get(); }

Q_SIGNALS:
    void finished(int exitCode);

private:
    void onFinished(const ModeComparisonSummary &summary);
    void printTable(const ModeComparisonSummary &summary) const;

    ModeComparisonOptions m_options;
    ModeComparison *m_comparison;
    std::unique_ptr<ModeComparisonView> m_view; // never shown: the exporter's source
    QStringList m_written;
};

// Runs `options` headlessly to the end in the application's event loop;
// returns the exit code.
int runHeadlessModeComparison(const ModeComparisonOptions &options, const QString &nodeBinary);

} // namespace parasync::ui
