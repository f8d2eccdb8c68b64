#include "ui/windows/run_replay_window.h"

#include "config/update_modes.h"
#include "ui/charts/run_charts_view.h"
#include "ui/charts/step_timeline_view.h"

#include <QAction>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QStatusBar>
#include <QToolBar>

namespace parasync::ui {

RunReplayWindow::RunReplayWindow(const LoadedRun &run, QWidget *parent)
    : QMainWindow(parent)
    , m_run(run)
    , m_charts(new RunChartsView(this))
{
    setAttribute(Qt::WA_DeleteOnClose);
    setWindowTitle(tr("%1 (replay) \u2014 Parasync").arg(QFileInfo(run.directory).fileName()));
    auto *toolbar = addToolBar(tr("Replay"));
    toolbar->setObjectName(QStringLiteral("replayToolbar"));
    toolbar->addAction(tr("Export all..."), this, &RunReplayWindow::exportAllInteractive);
    setCentralWidget(m_charts);
    m_charts->setSnapshot(run.snapshot);
    m_charts->flush();
    // A finished run opens showing all of it, as a trace viewer does.
    m_charts->timeline()->ensureUpToDate();
    m_charts->timeline()->view()->fitAll();
    const RunSnapshot &snapshot = *run.snapshot;
    QString message = tr("%1: %2 records, global step %3, %4 mode change(s), mode at the end: %5")
                          .arg(run.directory)
                          .arg(run.info.records)
                          .arg(snapshot.globalStep)
                          .arg(snapshot.modeChanges.size())
                          .arg(QString::fromStdString(describeMode(snapshot.mode)));
    if (run.info.skippedLines > 0)
        message
            += tr("; %1 line(s) skipped (a run stopped mid-write leaves a torn last line)").arg(run.info.skippedLines);
    if (!run.info.recordsNote.empty())
        message += QStringLiteral("; ") + QString::fromStdString(run.info.recordsNote);
    statusBar()->showMessage(message);
    resize(1400, 850);
}

void RunReplayWindow::exportAllInteractive()
{
    const QString parent = QFileDialog::getExistingDirectory(this, tr("Export every chart into a new folder in"));
    if (parent.isEmpty())
        return;
    const QString dir = QDir(parent).filePath(QFileInfo(m_run.directory).fileName() + QStringLiteral("_charts"));
    QStringList written;
    QString error;
    if (m_charts->exportAll(dir, &written, &error, m_run.directory))
        statusBar()->showMessage(tr("Wrote %1 files into %2").arg(written.size()).arg(dir));
    else
        QMessageBox::warning(this, tr("Export failed"), error);
}

} // namespace parasync::ui
