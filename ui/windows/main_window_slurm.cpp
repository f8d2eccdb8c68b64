// MainWindow: the planned cluster as a job of the user's Slurm -- its dialog
// and the back end it makes. Following the job is every back end's
// (main_window_jobs.cpp).

#include "ui/windows/main_window.h"

#include "orchestration/slurm_backend.h"
#include "ui/dialogs/slurm_dialog.h"

#include <QDir>

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
    m_slurmSettings = settings; // the dialog's answers, offered again next time
    auto backend = std::make_unique<SlurmBackend>(settings);
    backend->setStopOnQuit(cancelOnQuit);
    return runAsJob(std::move(backend), plan);
}

} // namespace parasync::ui
