#pragma once

// Designs a cluster: any number of ps and worker addresses, the model, data
// and optimizer, and the update mode; saves it as a cluster file and hands
// the plan back to be launched.

#include "config/cluster_file.h"
#include "config/cluster_plan.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QSpinBox;

namespace parasync::ui {

class ClusterDesignerDialog : public QDialog
{
    Q_OBJECT

public:
    explicit ClusterDesignerDialog(const ClusterPlan &plan, const QString &filePath = {}, QWidget *parent = nullptr);

    // The plan as edited, or false with `error` saying which field is wrong.
    bool plan(ClusterPlan *plan, QString *error) const;
    void setPlan(const ClusterPlan &plan);
    QString filePath() const { return m_filePath; }

    // Writes the plan to `path`; false with a message shown in the dialog.
    bool saveTo(const QString &path);

Q_SIGNALS:
    void saved(const QString &path);

private:
    // plan(), or false with its error shown in the dialog.
    bool planOrSayWhy(ClusterPlan *current);
    void save();
    void saveAs();
    void launchIfValid();
    // The designed cluster as a Kubeflow TFJob manifest (TfJobDialog).
    void exportTfJob();
    void updateModeFields();
    // Says how stale an async gradient can get with this many workers, and
    // what to do if the loss grows; hidden where staleness is no concern.
    void updateStalenessHint();

    QString m_filePath;
    TrainingOptions m_base;                 // flags the dialog does not show are kept from here
    std::vector<RemoteHost> m_hosts;        // the file's ssh hosts, kept as they were (not edited here)
    std::map<int, WorkerPace> m_workerPace; // each worker's own pace, kept as it was (not edited here)
    // The workers' own commands (Python workers), kept as they were (not edited here).
    std::vector<std::string> m_workerCommand;
    std::map<int, std::vector<std::string>> m_workerCommands;
    QListWidget *m_ps;
    QListWidget *m_psBackups; // --ps_backup_hosts: empty, or one per ps task
    QListWidget *m_workers;
    QComboBox *m_model;
    QLineEdit *m_dataset;
    QComboBox *m_optimizer;
    QDoubleSpinBox *m_learningRate;
    QSpinBox *m_batchSize;
    QComboBox *m_mode;
    QSpinBox *m_staleness;
    QSpinBox *m_replicas;
    QSpinBox *m_totalReplicas;
    QCheckBox *m_stalenessRule;
    QSpinBox *m_lastStep;
    QSpinBox *m_maxWorkers;
    QLineEdit *m_logdir;
    QLabel *m_stalenessHint;
    QLabel *m_error;
};

} // namespace parasync::ui
