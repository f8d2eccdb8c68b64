// MainWindow: the planned cluster as a job of a cluster manager (a
// ClusterBackend: Slurm's today) -- checked, started and followed in the
// job panel, the charts on ps:0 once it runs, completed from the run
// directory when it ends. Every back end takes this one path; its own file
// holds only its dialog (main_window_slurm.cpp).

#include "ui/windows/main_window.h"

#include "orchestration/cluster_backend.h"
#include "ui/models/run_loader.h"

#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QPlainTextEdit>
#include <QStatusBar>

namespace parasync::ui {

bool MainWindow::runAsJob(std::unique_ptr<ClusterBackend> backend, const ClusterPlan &plan)
{
    if (jobIsLive()) {
        showError(tr("A job is running"),
                  tr("%1 is still queued or running: stop it first.").arg(m_backend->jobName()));
        return false;
    }
    m_backend = std::move(backend);
    m_backend->setWatcher(m_watcher);
    ClusterBackend *job = m_backend.get();
    showJobPanel(tr("%1 job").arg(job->name()));
    connect(job, &ClusterBackend::said, this, &MainWindow::logJob);
    connect(job, &ClusterBackend::statusChanged, this, [this](const QString &line) {
        statusBar()->showMessage(line, 10000);
        m_connectionLabel->setText(line);
        updateActions();
    });
    connect(job, &ClusterBackend::checked, this, [this](bool passed, const QString &report) {
        for (const QString &line : report.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            logJob(line);
        if (passed)
            return;
        statusBar()->showMessage(tr("Not started (pre-flight check)."), 10000);
        showError(tr("Not started on %1").arg(m_backend->name()), tr("The pre-flight check failed:\n\n%1").arg(report));
    });
    connect(job, &ClusterBackend::running, this,
            [this, logdir = plan.training.logdir] { m_runDirectory = QString::fromStdString(logdir); });
    connect(job, &ClusterBackend::taskOutput, this,
            [this](const QString &task, const QString &line) { logJob(task + QStringLiteral(" | ") + line); });
    connect(job, &ClusterBackend::failed, this, [this](const QString &message) {
        logJob(message);
        showError(m_backend->name(), message);
        updateActions();
    });
    connect(job, &ClusterBackend::ended, this, [this](ClusterBackend::Outcome, const QString &summary) {
        logJob(summary);
        statusBar()->showMessage(summary, 15000);
        updateActions();
        // The run directory holds every step: complete the charts from it.
        if (!m_runDirectory.isEmpty() && QDir(m_runDirectory).exists(QStringLiteral("steps.jsonl"))) {
            m_finalReplay = QDir(m_runDirectory).absolutePath();
            m_loader->load(m_runDirectory);
        }
    });
    job->start(plan, RpcSettings{});
    return true;
}

bool MainWindow::jobIsLive() const
{
    return m_backend && m_backend->isLive();
}

void MainWindow::showJobPanel(const QString &title)
{
    if (!m_jobDock) {
        m_jobDock = new QDockWidget(this);
        m_jobDock->setObjectName(QStringLiteral("jobDock"));
        m_jobLog = new QPlainTextEdit(m_jobDock);
        m_jobLog->setObjectName(QStringLiteral("jobLog"));
        m_jobLog->setReadOnly(true);
        m_jobLog->setMaximumBlockCount(5000);
        m_jobLog->setLineWrapMode(QPlainTextEdit::NoWrap);
        m_jobDock->setWidget(m_jobLog);
        addDockWidget(Qt::BottomDockWidgetArea, m_jobDock);
    }
    m_jobDock->setWindowTitle(title);
    m_jobDock->show();
}

void MainWindow::logJob(const QString &line)
{
    if (m_jobLog)
        m_jobLog->appendPlainText(line);
}

QString MainWindow::jobLog() const
{
    return m_jobLog ? m_jobLog->toPlainText() : QString();
}

} // namespace parasync::ui
