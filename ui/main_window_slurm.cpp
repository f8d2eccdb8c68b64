// MainWindow: running the planned cluster as a Slurm job -- the dialog, the
// checks, the submission, and the job's own log.

#include "ui/main_window.h"

#include "base/version.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/slurm_job.h"
#include "orchestration/slurm_preflight.h"
#include "ui/run_loader.h"
#include "ui/slurm_dialog.h"

#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QPlainTextEdit>
#include <QStatusBar>

namespace parasync::ui {

void MainWindow::askRunOnSlurm()
{
    SlurmSettings initial = m_slurmSettings;
    if (initial.outputDirectory.empty())
        initial.outputDirectory = QDir::home().filePath(QStringLiteral("parasync-slurm")).toStdString();
    SlurmDialog dialog(m_currentPlan ? *m_currentPlan : demoPlan(), initial, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    submitToSlurm(dialog.plan(), dialog.settings(), dialog.cancelOnQuit());
}

bool MainWindow::submitToSlurm(const ClusterPlan &plan, const SlurmSettings &settings, bool cancelOnQuit)
{
    if (m_slurmJob && !m_slurmJob->isOver() && !m_slurmJob->jobId().isEmpty()) {
        showError(tr("A Slurm job is running"),
                  tr("Slurm job %1 is still queued or running: stop it first.").arg(m_slurmJob->jobId()));
        return false;
    }
    m_slurmPlan = plan;
    m_slurmSettings = settings;
    // The nodes must run this build: the script's first step checks.
    m_slurmSettings.expectedVersion = nodeVersionLine();
    m_slurmCancelOnQuit = cancelOnQuit;
    if (!m_slurmDock) {
        m_slurmDock = new QDockWidget(tr("Slurm job"), this);
        m_slurmDock->setObjectName(QStringLiteral("slurmDock"));
        m_slurmLog = new QPlainTextEdit(m_slurmDock);
        m_slurmLog->setObjectName(QStringLiteral("slurmLog"));
        m_slurmLog->setReadOnly(true);
        m_slurmLog->setMaximumBlockCount(5000);
        m_slurmLog->setLineWrapMode(QPlainTextEdit::NoWrap);
        m_slurmDock->setWidget(m_slurmLog);
        addDockWidget(Qt::BottomDockWidgetArea, m_slurmDock);
    }
    m_slurmDock->show();
    logSlurm(tr("Pre-flight check of Slurm: the partition, its room, parasync-node on its nodes"));
    statusBar()->showMessage(tr("Checking Slurm before submitting..."));
    m_slurmPreflight = std::make_unique<SlurmPreflight>();
    connect(m_slurmPreflight.get(), &SlurmPreflight::finished, this, [this](bool passed) {
        const QString report = m_slurmPreflight->report();
        for (const QString &line : report.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            logSlurm(line);
        if (!passed) {
            statusBar()->showMessage(tr("Not submitted (pre-flight check)."), 10000);
            showError(tr("Not submitted to Slurm"), tr("The pre-flight check failed:\n\n%1").arg(report));
            return;
        }
        m_slurmSettings.partition = m_slurmPreflight->resolvedPartition().toStdString();
        submitSlurmJobNow();
    });
    m_slurmPreflight->start(m_slurmPlan, m_slurmSettings);
    return true;
}

void MainWindow::submitSlurmJobNow()
{
    m_slurmJob = std::make_unique<SlurmJob>();
    m_slurmJob->setWatcher(m_watcher);
    m_slurmJob->setCancelOnQuit(m_slurmCancelOnQuit);
    connect(m_slurmJob.get(), &SlurmJob::submitted, this, [this](const QString &jobId, const QString &script) {
        logSlurm(tr("Submitted Slurm job %1 (the batch script: %2)").arg(jobId, script));
        statusBar()->showMessage(tr("Slurm job %1 submitted").arg(jobId), 10000);
        updateActions();
    });
    connect(m_slurmJob.get(), &SlurmJob::statusChanged, this, [this](const SlurmJobStatus &status) {
        const QString line = QString::fromStdString(describeSlurmJobStatus(status));
        logSlurm(line);
        m_connectionLabel->setText(line);
    });
    connect(m_slurmJob.get(), &SlurmJob::running, this, [this](const QString &ps0) {
        logSlurm(tr("ps:0 runs at %1: watching it").arg(ps0));
        m_runDirectory = QString::fromStdString(m_slurmPlan.training.logdir);
    });
    connect(m_slurmJob.get(), &SlurmJob::jobOutput, this,
            [this](const QString &line) { logSlurm(QStringLiteral("job | ") + line); });
    connect(m_slurmJob.get(), &SlurmJob::taskOutput, this, [this](int, const TaskId &task, const QString &line) {
        logSlurm(QString::fromStdString(task.toString()) + QStringLiteral(" | ") + line);
    });
    connect(m_slurmJob.get(), &SlurmJob::failed, this, [this](const QString &message) {
        logSlurm(message);
        showError(tr("Slurm"), message);
        updateActions();
    });
    connect(m_slurmJob.get(), &SlurmJob::ended, this, [this](const SlurmJobStatus &status) {
        statusBar()->showMessage(
            tr("Slurm job %1 ended: %2").arg(m_slurmJob->jobId(), QString::fromStdString(status.state)), 15000);
        updateActions();
        // The run directory holds every step: complete the charts from it.
        if (!m_runDirectory.isEmpty() && QDir(m_runDirectory).exists(QStringLiteral("steps.jsonl"))) {
            m_finalReplay = QDir(m_runDirectory).absolutePath();
            m_loader->load(m_runDirectory);
        }
    });
    QString error;
    if (!m_slurmJob->submit(m_slurmPlan, m_slurmSettings, RpcSettings{}, &error)) {
        logSlurm(error);
        showError(tr("Not submitted to Slurm"), error);
    }
}

void MainWindow::logSlurm(const QString &line)
{
    if (m_slurmLog)
        m_slurmLog->appendPlainText(line);
}

QString MainWindow::slurmLog() const
{
    return m_slurmLog ? m_slurmLog->toPlainText() : QString();
}

} // namespace parasync::ui
