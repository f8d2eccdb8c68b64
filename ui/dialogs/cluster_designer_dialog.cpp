#include "ui/dialogs/cluster_designer_dialog.h"

#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "config/task_options.h"
#include "config/update_modes.h"
#include "engine/model.h"
#include "engine/optimizer.h"
#include "ui/dialogs/tfjob_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

namespace parasync::ui {

namespace {

// An address list with add/remove buttons; entries are edited in place.
// An empty list's first address is `first`.
QWidget *hostListEditor(const QString &title, QListWidget *list, QWidget *parent,
                        const QString &first = QStringLiteral("127.0.0.1:2222"))
{
    auto *box = new QGroupBox(title, parent);
    auto *add = new QToolButton(box);
    add->setText(QObject::tr("Add"));
    add->setToolTip(QObject::tr("Add a task on the next port"));
    auto *remove = new QToolButton(box);
    remove->setText(QObject::tr("Remove"));
    list->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed
                          | QAbstractItemView::SelectedClicked);
    QObject::connect(add, &QToolButton::clicked, list, [list, first] {
        // Next to the last address, one port up: the usual local layout.
        QString next = first;
        if (list->count() > 0) {
            const QString last = list->item(list->count() - 1)->text();
            const qsizetype colon = last.lastIndexOf(QLatin1Char(':'));
            bool ok = false;
            const int port = last.mid(colon + 1).toInt(&ok);
            if (colon > 0 && ok)
                next = last.left(colon + 1) + QString::number(port + 1);
        }
        auto *item = new QListWidgetItem(next, list);
        item->setFlags(item->flags() | Qt::ItemIsEditable);
        list->setCurrentItem(item);
        list->editItem(item);
    });
    QObject::connect(remove, &QToolButton::clicked, list, [list] { delete list->currentItem(); });
    auto *buttons = new QHBoxLayout;
    buttons->addWidget(add);
    buttons->addWidget(remove);
    buttons->addStretch(1);
    auto *layout = new QVBoxLayout(box);
    layout->addWidget(list);
    layout->addLayout(buttons);
    return box;
}

void fillHosts(QListWidget *list, const std::vector<HostPort> &hosts)
{
    list->clear();
    for (const HostPort &host : hosts) {
        auto *item = new QListWidgetItem(QString::fromStdString(host.toString()), list);
        item->setFlags(item->flags() | Qt::ItemIsEditable);
    }
}

std::vector<HostPort> readHosts(QListWidget *list, const char *job)
{
    std::vector<HostPort> hosts;
    for (int i = 0; i < list->count(); ++i) {
        const std::string text = list->item(i)->text().trimmed().toStdString();
        try {
            hosts.push_back(parseHostPort(text));
        } catch (const InputError &error) {
            throw InputError(std::string(job) + ":" + std::to_string(i) + ": " + error.what());
        }
    }
    return hosts;
}

} // namespace

ClusterDesignerDialog::ClusterDesignerDialog(const ClusterPlan &plan, const QString &filePath, QWidget *parent)
    : QDialog(parent)
    , m_filePath(filePath)
    , m_ps(new QListWidget(this))
    , m_psBackups(new QListWidget(this))
    , m_workers(new QListWidget(this))
    , m_model(new QComboBox(this))
    , m_dataset(new QLineEdit(this))
    , m_optimizer(new QComboBox(this))
    , m_learningRate(new QDoubleSpinBox(this))
    , m_batchSize(new QSpinBox(this))
    , m_mode(new QComboBox(this))
    , m_staleness(new QSpinBox(this))
    , m_replicas(new QSpinBox(this))
    , m_totalReplicas(new QSpinBox(this))
    , m_stalenessRule(new QCheckBox(tr("Learning rate ÷ staleness"), this))
    , m_lastStep(new QSpinBox(this))
    , m_maxWorkers(new QSpinBox(this))
    , m_logdir(new QLineEdit(this))
    , m_stalenessHint(new QLabel(this))
    , m_error(new QLabel(this))
{
    setWindowTitle(filePath.isEmpty() ? tr("Design a cluster") : tr("Cluster %1").arg(filePath));
    m_ps->setObjectName(QStringLiteral("psHosts"));
    m_psBackups->setObjectName(QStringLiteral("psBackupHosts"));
    m_psBackups->setToolTip(tr("Optional: one address per ps task, in the same order. Each runs a backup that "
                               "holds every update the workers saw acknowledged and takes over when its ps task "
                               "dies (--ps_backup_hosts)."));
    m_workers->setObjectName(QStringLiteral("workerHosts"));
    m_mode->setObjectName(QStringLiteral("updateMode"));
    for (const std::string &name : modelNames())
        m_model->addItem(QString::fromStdString(name));
    for (const std::string &name : optimizerNames())
        m_optimizer->addItem(QString::fromStdString(name));
    m_dataset->setPlaceholderText(tr("the model's default (linear: y = 2x + 10 + noise)"));
    m_dataset->setToolTip(
        tr("linear, blobs, blobs:K:D, lowrank:ROWS:COLS:RANK[:NOISE], mnist:DIR, idx:IMAGES,LABELS, csv:PATH"));
    m_learningRate->setDecimals(5);
    m_learningRate->setRange(0.00001, 10);
    m_learningRate->setSingleStep(0.01);
    m_batchSize->setRange(1, 1000000);
    for (const UpdateModeInfo &info : updateModes()) {
        m_mode->addItem(QString::fromUtf8(info.label), int(info.mode));
        m_mode->setItemData(m_mode->count() - 1, QString::fromUtf8(info.meaning), Qt::ToolTipRole);
    }
    m_staleness->setRange(0, 100000);
    m_replicas->setRange(0, 100000);
    m_replicas->setSpecialValueText(tr("all live workers"));
    m_totalReplicas->setRange(0, 100000);
    m_totalReplicas->setSpecialValueText(tr("all workers"));
    m_totalReplicas->setToolTip(tr("More than replicas to aggregate means backup workers"));
    m_stalenessRule->setObjectName(QStringLiteral("stalenessRule"));
    m_stalenessRule->setToolTip(tr("Apply a gradient computed S global steps ago at the learning rate / S (Zhang "
                                   "et al., staleness-aware async SGD; --learning_rate_by_staleness)"));
    m_lastStep->setRange(0, std::numeric_limits<int>::max());
    m_lastStep->setSpecialValueText(tr("until stopped")); // --last_step=0
    m_maxWorkers->setObjectName(QStringLiteral("maxWorkers"));
    m_maxWorkers->setRange(0, kMaxWorkers);
    m_maxWorkers->setSpecialValueText(tr("the workers listed")); // --max_workers=0
    m_maxWorkers->setToolTip(tr("An elastic cluster: up to this many workers, so that the process panel can add "
                                "workers while it trains (--max_workers)"));
    m_logdir->setPlaceholderText(tr("none (no checkpoints, no run directory to replay)"));
    auto *browse = new QToolButton(this);
    browse->setText(tr("..."));
    connect(browse, &QToolButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Run directory"), m_logdir->text());
        if (!dir.isEmpty())
            m_logdir->setText(dir);
    });
    connect(m_mode, &QComboBox::currentIndexChanged, this, &ClusterDesignerDialog::updateModeFields);
    connect(m_mode, &QComboBox::currentIndexChanged, this, &ClusterDesignerDialog::updateStalenessHint);
    connect(m_workers->model(), &QAbstractItemModel::rowsInserted, this, &ClusterDesignerDialog::updateStalenessHint);
    connect(m_workers->model(), &QAbstractItemModel::rowsRemoved, this, &ClusterDesignerDialog::updateStalenessHint);
    connect(m_learningRate, &QDoubleSpinBox::valueChanged, this, &ClusterDesignerDialog::updateStalenessHint);

    auto *hosts = new QHBoxLayout;
    hosts->addWidget(hostListEditor(tr("Parameter servers (ps)"), m_ps, this));
    hosts->addWidget(hostListEditor(tr("ps backups (optional)"), m_psBackups, this, QStringLiteral("127.0.0.1:2232")));
    hosts->addWidget(hostListEditor(tr("Workers (worker:0 is the chief)"), m_workers, this));

    auto *training = new QFormLayout;
    training->addRow(tr("Model"), m_model);
    training->addRow(tr("Dataset"), m_dataset);
    training->addRow(tr("Optimizer"), m_optimizer);
    training->addRow(tr("Learning rate"), m_learningRate);
    training->addRow(tr("Batch size"), m_batchSize);
    training->addRow(tr("Last step"), m_lastStep);
    training->addRow(tr("Room for workers"), m_maxWorkers);
    auto *logdirRow = new QHBoxLayout;
    logdirRow->addWidget(m_logdir, 1);
    logdirRow->addWidget(browse);
    training->addRow(tr("Run directory (logdir)"), logdirRow);
    auto *modes = new QFormLayout;
    modes->addRow(tr("Update mode"), m_mode);
    modes->addRow(tr("Staleness (ssp)"), m_staleness);
    modes->addRow(tr("Replicas to aggregate (sync)"), m_replicas);
    modes->addRow(tr("Total replicas (sync)"), m_totalReplicas);
    modes->addRow(QString(), m_stalenessRule);
    auto *trainingBox = new QGroupBox(tr("Training"), this);
    trainingBox->setLayout(training);
    auto *modeBox = new QGroupBox(tr("Updates"), this);
    modeBox->setLayout(modes);
    auto *forms = new QHBoxLayout;
    forms->addWidget(trainingBox, 3);
    forms->addWidget(modeBox, 2);

    m_stalenessHint->setObjectName(QStringLiteral("stalenessHint"));
    m_stalenessHint->setWordWrap(true);
    m_stalenessHint->setStyleSheet(QStringLiteral("color: #8a5a00"));
    m_stalenessHint->hide();
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #c62828"));
    m_error->hide();

    auto *buttons = new QDialogButtonBox(this);
    QPushButton *launch = buttons->addButton(tr("Launch"), QDialogButtonBox::AcceptRole);
    launch->setObjectName(QStringLiteral("launchCluster"));
    QPushButton *saveButton = buttons->addButton(tr("Save"), QDialogButtonBox::ActionRole);
    QPushButton *saveAsButton = buttons->addButton(tr("Save as..."), QDialogButtonBox::ActionRole);
    QPushButton *tfJobButton = buttons->addButton(tr("Export TFJob..."), QDialogButtonBox::ActionRole);
    tfJobButton->setObjectName(QStringLiteral("exportTfJob"));
    tfJobButton->setToolTip(tr("A Kubeflow TFJob manifest for this cluster: parasync-node runs in the pods, "
                               "taking the cluster and its task from TF_CONFIG"));
    buttons->addButton(QDialogButtonBox::Cancel);
    connect(tfJobButton, &QPushButton::clicked, this, &ClusterDesignerDialog::exportTfJob);
    connect(launch, &QPushButton::clicked, this, &ClusterDesignerDialog::launchIfValid);
    connect(saveButton, &QPushButton::clicked, this, &ClusterDesignerDialog::save);
    connect(saveAsButton, &QPushButton::clicked, this, &ClusterDesignerDialog::saveAs);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(hosts);
    layout->addLayout(forms);
    layout->addWidget(m_stalenessHint);
    layout->addWidget(m_error);
    layout->addWidget(buttons);
    setPlan(plan);
    resize(760, 560);
}

void ClusterDesignerDialog::setPlan(const ClusterPlan &plan)
{
    m_base = plan.training;
    m_hosts = plan.hosts;
    m_workerPace = plan.workerPace;
    m_workerCommand = plan.workerCommand;
    m_workerCommands = plan.workerCommands;
    fillHosts(m_ps, plan.cluster.ps);
    fillHosts(m_psBackups, plan.cluster.psBackups);
    fillHosts(m_workers, plan.cluster.workers);
    const TrainingOptions &t = plan.training;
    m_model->setCurrentText(QString::fromStdString(t.model));
    m_dataset->setText(QString::fromStdString(t.dataset));
    m_optimizer->setCurrentText(QString::fromStdString(t.optimizer));
    m_learningRate->setValue(t.learningRate);
    m_batchSize->setValue(t.batchSize);
    m_lastStep->setValue(int(std::min<int64_t>(t.lastStep, std::numeric_limits<int>::max())));
    m_maxWorkers->setValue(t.maxWorkers);
    m_logdir->setText(QString::fromStdString(t.logdir));
    m_mode->setCurrentIndex(std::max(0, m_mode->findData(int(t.mode.mode()))));
    m_staleness->setValue(t.mode.staleness());
    m_replicas->setValue(t.mode.replicas_to_aggregate());
    m_totalReplicas->setValue(t.mode.total_num_replicas());
    m_stalenessRule->setChecked(t.mode.learning_rate_by_staleness());
    updateModeFields();
    updateStalenessHint();
}

void ClusterDesignerDialog::updateStalenessHint()
{
    // In async every other worker may apply its gradient between a worker's
    // read of the parameters and its own push, so a gradient can be
    // workers - 1 updates old when it is applied. Below 16 workers that
    // rarely matters; the demo's learning rate of 0.05 trains with 16 async
    // workers and diverges from 32 (bench_cluster's 8-64 worker runs use
    // 0.005 for this reason). Sync averages fresh gradients only, and ssp
    // bounds the clocks' spread, so neither gets the hint: the table's
    // unboundedStaleness says which modes do.
    constexpr int kManyAsyncWorkers = 16;
    const int workers = m_workers->count();
    const UpdateModeInfo *mode = findUpdateMode(proto::UpdateMode(m_mode->currentData().toInt()));
    if (!mode || !mode->unboundedStaleness || workers < kManyAsyncWorkers) {
        m_stalenessHint->hide();
        return;
    }
    m_stalenessHint->setText(
        tr("%1 with %2 workers: a gradient can be up to %3 updates old when it is applied. If the loss grows "
           "instead of falling, lower the learning rate (now %4) about in proportion to the workers, or use ssp "
           "to bound the staleness.")
            .arg(QString::fromUtf8(mode->label))
            .arg(workers)
            .arg(workers - 1)
            .arg(m_learningRate->value()));
    m_stalenessHint->show();
}

void ClusterDesignerDialog::updateModeFields()
{
    const UpdateModeInfo *mode = findUpdateMode(proto::UpdateMode(m_mode->currentData().toInt()));
    m_staleness->setEnabled(mode && mode->knobs.staleness);
    m_replicas->setEnabled(mode && mode->knobs.replicas);
    m_totalReplicas->setEnabled(mode && mode->knobs.replicas);
    m_stalenessRule->setEnabled(mode && mode->knobs.stalenessRule);
}

bool ClusterDesignerDialog::plan(ClusterPlan *result, QString *error) const
{
    try {
        ClusterPlan plan;
        plan.cluster.ps = readHosts(m_ps, "ps");
        plan.cluster.psBackups = readHosts(m_psBackups, "ps_backup");
        plan.cluster.workers = readHosts(m_workers, "worker");
        plan.cluster.validate();
        plan.training = m_base;
        plan.hosts = m_hosts;
        // Each worker keeps its own pace (the demo's straggler), as long as
        // the cluster still has that worker.
        for (const auto &[index, pace] : m_workerPace)
            if (index < plan.cluster.numWorkers())
                plan.workerPace[index] = pace;
        plan.workerCommand = m_workerCommand;
        for (const auto &[index, command] : m_workerCommands)
            if (index < plan.cluster.numWorkers())
                plan.workerCommands[index] = command;
        TrainingOptions &t = plan.training;
        t.model = m_model->currentText().toStdString();
        t.dataset = m_dataset->text().trimmed().toStdString();
        t.optimizer = m_optimizer->currentText().toStdString();
        t.learningRate = float(m_learningRate->value());
        t.batchSize = m_batchSize->value();
        t.lastStep = m_lastStep->value();
        t.maxWorkers = m_maxWorkers->value();
        t.logdir = m_logdir->text().trimmed().toStdString();
        t.mode.set_mode(proto::UpdateMode(m_mode->currentData().toInt()));
        t.mode.set_staleness(m_staleness->value());
        t.mode.set_replicas_to_aggregate(m_replicas->value());
        t.mode.set_total_num_replicas(m_totalReplicas->value());
        // A mode whose row has no staleness rule (sync) never carries it.
        const UpdateModeInfo *mode = findUpdateMode(t.mode.mode());
        t.mode.set_learning_rate_by_staleness(mode && mode->knobs.stalenessRule && m_stalenessRule->isChecked());
        // Through the node's own flag parser: what passes here, every task accepts.
        *result = planFromClusterFile(clusterFileFromPlan(plan));
        return true;
    } catch (const InputError &e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
}

bool ClusterDesignerDialog::planOrSayWhy(ClusterPlan *current)
{
    QString error;
    if (plan(current, &error))
        return true;
    m_error->setText(error);
    m_error->show();
    return false;
}

bool ClusterDesignerDialog::saveTo(const QString &path)
{
    ClusterPlan current;
    if (!planOrSayWhy(&current))
        return false;
    try {
        writeClusterFile(path.toStdString(), clusterFileFromPlan(current));
    } catch (const InputError &e) {
        m_error->setText(QString::fromStdString(e.what()));
        m_error->show();
        return false;
    }
    m_filePath = path;
    setWindowTitle(tr("Cluster %1").arg(path));
    m_error->hide();
    Q_EMIT saved(path);
    return true;
}

void ClusterDesignerDialog::save()
{
    if (m_filePath.isEmpty())
        saveAs();
    else
        saveTo(m_filePath);
}

void ClusterDesignerDialog::saveAs()
{
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save cluster file"), m_filePath.isEmpty() ? QStringLiteral("cluster.json") : m_filePath,
        tr("Cluster files (*.json)"));
    if (!path.isEmpty())
        saveTo(path);
}

void ClusterDesignerDialog::exportTfJob()
{
    ClusterPlan current;
    if (!planOrSayWhy(&current))
        return;
    m_error->hide();
    TfJobDialog dialog(current, this);
    dialog.exec();
}

void ClusterDesignerDialog::launchIfValid()
{
    ClusterPlan current;
    if (!planOrSayWhy(&current))
        return;
    accept();
}

} // namespace parasync::ui
