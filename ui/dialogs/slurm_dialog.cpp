#include "ui/dialogs/slurm_dialog.h"

#include "base/error.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QVBoxLayout>

namespace parasync::ui {

SlurmDialog::SlurmDialog(const ClusterPlan &plan, const SlurmSettings &initial, QWidget *parent)
    : QDialog(parent)
    , m_plan(plan)
    , m_initial(initial)
    , m_partition(new QLineEdit(this))
    , m_account(new QLineEdit(this))
    , m_nodes(new QSpinBox(this))
    , m_time(new QLineEdit(this))
    , m_portBase(new QSpinBox(this))
    , m_node(new QLineEdit(this))
    , m_directory(new QLineEdit(this))
    , m_cancelOnQuit(new QCheckBox(tr("Cancel the job when this app quits"), this))
    , m_preview(new QPlainTextEdit(this))
    , m_error(new QLabel(this))
{
    setWindowTitle(tr("Run on Slurm"));
    m_partition->setObjectName(QStringLiteral("slurmPartition"));
    m_partition->setText(QString::fromStdString(initial.partition));
    m_partition->setPlaceholderText(tr("the cluster's default partition"));
    m_account->setText(QString::fromStdString(initial.account));
    m_account->setPlaceholderText(tr("your default account"));
    const int numTasks = plan.cluster.numPs() + plan.cluster.numWorkers();
    m_nodes->setRange(0, numTasks);
    m_nodes->setValue(initial.nodes);
    m_nodes->setSpecialValueText(tr("as Slurm places the %1 tasks").arg(numTasks));
    m_time->setText(QString::fromStdString(initial.timeLimit));
    m_time->setToolTip(tr("As sbatch --time takes it: minutes, HH:MM:SS or D-HH:MM:SS"));
    m_portBase->setObjectName(QStringLiteral("slurmPortBase"));
    m_portBase->setRange(1, 65535);
    m_portBase->setValue(initial.portBase);
    m_portBase->setToolTip(tr("Each task listens on this port plus its index among the tasks on its node"));
    m_node->setObjectName(QStringLiteral("slurmNode"));
    m_node->setText(QString::fromStdString(initial.node));
    m_node->setPlaceholderText(tr("parasync-node on the nodes' PATH"));
    m_directory->setObjectName(QStringLiteral("slurmDirectory"));
    m_directory->setText(QString::fromStdString(initial.outputDirectory));
    m_directory->setToolTip(tr("A folder on a file system the nodes share with this machine (your home, a project "
                               "folder): the script, each task's log and the run directory go there"));
    m_cancelOnQuit->setObjectName(QStringLiteral("slurmCancelOnQuit"));
    m_cancelOnQuit->setToolTip(tr("Otherwise the job trains on after the app quits; Stop cancels it either way"));
    m_preview->setObjectName(QStringLiteral("slurmPreview"));
    m_preview->setReadOnly(true);
    m_preview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_preview->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_error->setObjectName(QStringLiteral("slurmError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #c62828"));

    auto *browse = new QPushButton(tr("Browse..."), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir
            = QFileDialog::getExistingDirectory(this, tr("A folder the nodes share"), m_directory->text());
        if (!dir.isEmpty())
            m_directory->setText(dir);
    });
    auto *directoryRow = new QHBoxLayout;
    directoryRow->addWidget(m_directory, 1);
    directoryRow->addWidget(browse);
    auto *form = new QFormLayout;
    form->addRow(tr("Partition"), m_partition);
    form->addRow(tr("Account"), m_account);
    form->addRow(tr("Nodes"), m_nodes);
    form->addRow(tr("Time limit"), m_time);
    form->addRow(tr("Port base"), m_portBase);
    form->addRow(tr("parasync-node on the nodes"), m_node);
    form->addRow(tr("Shared folder"), directoryRow);
    form->addRow(QString(), m_cancelOnQuit);

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
    m_submit = buttons->addButton(tr("Submit"), QDialogButtonBox::AcceptRole);
    m_submit->setObjectName(QStringLiteral("slurmSubmit"));
    auto *save = buttons->addButton(tr("Save script..."), QDialogButtonBox::ActionRole);
    connect(save, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(
            this, tr("Save the batch script"), QDir(m_directory->text()).filePath(QStringLiteral("parasync.sbatch")),
            tr("Batch scripts (*.sbatch *.sh)"));
        if (!path.isEmpty())
            saveTo(path);
    });
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(new QLabel(tr("The batch script:"), this));
    layout->addWidget(m_preview, 1);
    layout->addWidget(m_error);
    layout->addWidget(buttons);
    for (QLineEdit *edit : {m_partition, m_account, m_time, m_node, m_directory})
        connect(edit, &QLineEdit::textChanged, this, &SlurmDialog::updatePreview);
    for (QSpinBox *spin : {m_nodes, m_portBase})
        connect(spin, &QSpinBox::valueChanged, this, &SlurmDialog::updatePreview);
    resize(820, 700);
    updatePreview();
}

SlurmSettings SlurmDialog::settings() const
{
    SlurmSettings s = m_initial;
    s.partition = m_partition->text().trimmed().toStdString();
    s.account = m_account->text().trimmed().toStdString();
    s.nodes = m_nodes->value();
    s.timeLimit = m_time->text().trimmed().toStdString();
    s.portBase = uint16_t(m_portBase->value());
    s.node = m_node->text().trimmed().toStdString();
    s.outputDirectory = m_directory->text().trimmed().toStdString();
    return s;
}

bool SlurmDialog::cancelOnQuit() const
{
    return m_cancelOnQuit->isChecked();
}

ClusterPlan SlurmDialog::plan() const
{
    ClusterPlan plan = m_plan;
    // A fresh run directory beside the logs: an old one would make the chief
    // restore its checkpoint and continue that run.
    if (plan.training.logdir.empty() && !m_directory->text().trimmed().isEmpty()) {
        const QDir dir(m_directory->text().trimmed());
        QString candidate = dir.filePath(QStringLiteral("run"));
        for (int n = 2; QFileInfo::exists(candidate); ++n)
            candidate = dir.filePath(QStringLiteral("run-%1").arg(n));
        plan.training.logdir = candidate.toStdString();
    }
    return plan;
}

void SlurmDialog::updatePreview()
{
    try {
        m_preview->setPlainText(QString::fromStdString(slurmBatchScript(plan(), settings())));
        m_error->clear();
        m_submit->setEnabled(true);
    } catch (const InputError &e) {
        m_preview->clear();
        m_error->setText(QString::fromStdString(e.what()));
        m_submit->setEnabled(false);
    }
}

bool SlurmDialog::saveTo(const QString &path)
{
    const QString script = m_preview->toPlainText();
    if (script.isEmpty())
        return false;
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(script.toUtf8()) < 0 || !file.commit()) {
        m_error->setText(tr("Cannot write %1: %2").arg(path, file.errorString()));
        return false;
    }
    QFile::setPermissions(path, QFile::permissions(path) | QFileDevice::ExeOwner);
    m_error->setText(tr("Saved %1: submit it with sbatch (see its first lines for the token)").arg(path));
    return true;
}

} // namespace parasync::ui
