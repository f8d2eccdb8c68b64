#pragma once

// Runs a designed cluster as a job of the user's Slurm: the person picks
// the partition, the nodes, the time limit, the port base, where
// parasync-node is on the nodes and a folder the nodes share with this
// machine, sees the batch script as it will be submitted, and either saves
// it (to submit by hand) or submits it from the app.

#include "config/cluster_plan.h"
#include "slurm/slurm_batch_script.h"

#include <QDialog>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace parasync::ui {

class SlurmDialog : public QDialog
{
    Q_OBJECT

public:
    SlurmDialog(const ClusterPlan &plan, const SlurmSettings &initial, QWidget *parent = nullptr);

    // The settings as filled in.
    SlurmSettings settings() const;
    // Whether quitting the app should cancel the job.
    bool cancelOnQuit() const;
    // The plan with its run directory in the shared folder, as it will be submitted.
    ClusterPlan plan() const;
    // Writes the script to `path`; false with the message shown in the dialog.
    bool saveTo(const QString &path);

private:
    void updatePreview();

    ClusterPlan m_plan;
    SlurmSettings m_initial;
    QLineEdit *m_partition;
    QLineEdit *m_account;
    QSpinBox *m_nodes;
    QLineEdit *m_time;
    QSpinBox *m_portBase;
    QLineEdit *m_node;
    QLineEdit *m_directory;
    QCheckBox *m_cancelOnQuit;
    QPlainTextEdit *m_preview;
    QLabel *m_error;
    QPushButton *m_submit = nullptr;
};

} // namespace parasync::ui
