#pragma once

// "Compare modes" in the desktop app: a window that runs a ModeComparison
// (with its own launcher and watcher, so a cluster the main window shows is
// left alone), says while it runs which mode is training, its global step,
// time and loss, with a Cancel button, and then shows the comparison figure
// with Export and a way to open the three run directories in Compare runs.
// GUI thread; nothing here blocks it but the few hundred milliseconds a
// cancelled run's tasks take to exit.

#include "orchestration/mode_comparison.h"

#include <QMainWindow>

class QAction;
class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;

namespace parasync::ui {

class ModeComparisonView;

class ModeComparisonWindow : public QMainWindow
{
    Q_OBJECT

public:
    explicit ModeComparisonWindow(QWidget *parent = nullptr);
    ~ModeComparisonWindow() override;

    // Starts the comparison; false when the options are refused (the window
    // then says why and what to change).
    bool start(const ModeComparisonOptions &options, const QString &nodeBinary);
    // The comparison the "Compare modes" action runs with one click: `plan`
    // (the demo) at the comparison's pace, async, sync and ssp with the
    // plan's staleness, the default target, into a new folder among the
    // app's data.
    static ModeComparisonOptions defaultOptions(const ClusterPlan &plan);
    // A named workload's comparison (config/workloads.h): its plan with the
    // comparison's defaults, its contenders and its target.
    static ModeComparisonOptions workloadOptions(const std::string &name);
    // A new window over `parent`, shown, running `options` (with a folder
    // among the app's data when they name none).
    static ModeComparisonWindow *open(QWidget *parent, ModeComparisonOptions options, const QString &nodeBinary);

    ModeComparison *comparison() const { return m_comparison; }
    ModeComparisonView *view() const { return m_view; }
    bool isDone() const { return m_done; }
    // Writes the figure and its CSV files into `directory`.
    bool exportTo(const QString &directory, QStringList *written, QString *error);

Q_SIGNALS:
    // Every run ended (or the comparison was cancelled) and the figure shows them.
    void comparisonFinished();

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void onProgress(const ModeRunProgress &progress);
    void onFinished(const ModeComparisonSummary &summary);
    void askExport();
    void openInCompareRuns();
    void warn(const QString &title, const QString &text);
    // The held-out metrics the runs so far logged, to choose from.
    void offerHeldOutMetrics(const ModeComparisonSummary &summary);

    ModeComparison *m_comparison;
    ModeComparisonView *m_view;
    QLabel *m_status;
    QProgressBar *m_progressBar;
    QPushButton *m_cancel;
    QAction *m_export;
    QAction *m_compareRuns;
    QComboBox *m_heldOutMetric;
    bool m_done = false;
};

} // namespace parasync::ui
