#include "ui/dialogs/tfjob_dialog.h"
#include "base/version.h"

#include "base/error.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QVBoxLayout>

namespace parasync::ui {

TfJobDialog::TfJobDialog(const ClusterPlan &plan, QWidget *parent)
    : QDialog(parent)
    , m_plan(plan)
    , m_name(new QLineEdit(this))
    , m_namespace(new QLineEdit(this))
    , m_image(new QLineEdit(this))
    , m_command(new QLineEdit(this))
    , m_args(new QPlainTextEdit(this))
    , m_restartPolicy(new QComboBox(this))
    , m_chief(new QCheckBox(tr("Run worker:0 as the TFJob's Chief replica"), this))
    , m_tokenSecret(new QLineEdit(this))
    , m_port(new QSpinBox(this))
    , m_preview(new QPlainTextEdit(this))
    , m_error(new QLabel(this))
{
    setWindowTitle(tr("Export a Kubeflow TFJob"));
    const TfJobSettings defaults;
    m_name->setObjectName(QStringLiteral("tfJobName"));
    m_name->setText(QString::fromStdString(defaults.name));
    m_namespace->setPlaceholderText(tr("kubectl's current namespace"));
    m_image->setObjectName(QStringLiteral("tfJobImage"));
    m_image->setPlaceholderText(
        tr("the image that holds parasync-node, e.g. registry.example.com/parasync:%1").arg(QLatin1String(version())));
    m_command->setObjectName(QStringLiteral("tfJobCommand"));
    m_command->setText(QStringLiteral("parasync-node"));
    m_args->setObjectName(QStringLiteral("tfJobArgs"));
    m_args->setToolTip(tr("One argument per line. The same in every pod: TF_CONFIG, set by the training "
                          "operator, gives each pod the cluster and its task."));
    QStringList args;
    for (const std::string &arg : tfJobArguments(plan))
        args << QString::fromStdString(arg);
    m_args->setPlainText(args.join(QLatin1Char('\n')));
    m_args->setFixedHeight(fontMetrics().lineSpacing() * 5 + 12);
    for (const char *policy : {"OnFailure", "Never", "Always", "ExitCode"})
        m_restartPolicy->addItem(QString::fromLatin1(policy));
    m_restartPolicy->setToolTip(tr("OnFailure restarts a pod whose parasync-node exits with an error, "
                                   "e.g. when it starts before its service's DNS name resolves"));
    m_chief->setToolTip(tr("TF 2's layout; parasync-node takes TF_CONFIG's chief as its worker:0"));
    m_tokenSecret->setObjectName(QStringLiteral("tfJobTokenSecret"));
    m_tokenSecret->setPlaceholderText(tr("none: the pods run with --insecure"));
    m_tokenSecret->setToolTip(tr("A Secret with the key \"token\": kubectl create secret generic NAME "
                                 "--from-literal=token=$(parasync-node --generate_token)"));
    m_port->setRange(1, 65535);
    m_port->setValue(defaults.port);
    m_preview->setObjectName(QStringLiteral("tfJobPreview"));
    m_preview->setReadOnly(true);
    m_preview->setPlaceholderText(tr("The manifest shows here once the image is given and every field is valid."));
    m_preview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_preview->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_error->setObjectName(QStringLiteral("tfJobError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #c62828"));

    auto *form = new QFormLayout;
    form->addRow(tr("Name"), m_name);
    form->addRow(tr("Namespace"), m_namespace);
    form->addRow(tr("Image"), m_image);
    form->addRow(tr("Command"), m_command);
    form->addRow(tr("Args"), m_args);
    form->addRow(tr("Restart policy"), m_restartPolicy);
    form->addRow(QString(), m_chief);
    form->addRow(tr("Token Secret"), m_tokenSecret);
    form->addRow(tr("Port"), m_port);
    auto *summary = new QLabel(
        tr("%n ps and %1 workers from the design", nullptr, m_plan.cluster.numPs()).arg(m_plan.cluster.numWorkers()),
        this);
    auto *left = new QVBoxLayout;
    left->addWidget(summary);
    left->addLayout(form);
    left->addStretch(1);
    auto *previewBox = new QGroupBox(tr("Manifest"), this);
    auto *previewLayout = new QVBoxLayout(previewBox);
    previewLayout->addWidget(m_preview);
    auto *columns = new QHBoxLayout;
    columns->addLayout(left, 1);
    columns->addWidget(previewBox, 1);

    auto *buttons = new QDialogButtonBox(this);
    m_save = buttons->addButton(tr("Save..."), QDialogButtonBox::AcceptRole);
    m_save->setObjectName(QStringLiteral("tfJobSave"));
    m_copy = buttons->addButton(tr("Copy"), QDialogButtonBox::ActionRole);
    buttons->addButton(QDialogButtonBox::Close);
    connect(m_save, &QPushButton::clicked, this, &TfJobDialog::saveAs);
    connect(m_copy, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(m_preview->toPlainText()); });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    for (QLineEdit *edit : {m_name, m_namespace, m_image, m_command, m_tokenSecret})
        connect(edit, &QLineEdit::textChanged, this, &TfJobDialog::updatePreview);
    connect(m_args, &QPlainTextEdit::textChanged, this, &TfJobDialog::updatePreview);
    connect(m_restartPolicy, &QComboBox::currentIndexChanged, this, &TfJobDialog::updatePreview);
    connect(m_chief, &QCheckBox::toggled, this, &TfJobDialog::updatePreview);
    connect(m_port, &QSpinBox::valueChanged, this, &TfJobDialog::updatePreview);
    auto *layout = new QVBoxLayout(this);
    layout->addLayout(columns, 1);
    layout->addWidget(m_error);
    layout->addWidget(buttons);
    updatePreview();
    resize(1000, 620);
}

TfJobSettings TfJobDialog::settings() const
{
    TfJobSettings result;
    result.name = m_name->text().trimmed().toStdString();
    result.kubernetesNamespace = m_namespace->text().trimmed().toStdString();
    result.image = m_image->text().trimmed().toStdString();
    result.command.clear();
    for (const QString &part : QProcess::splitCommand(m_command->text()))
        result.command.push_back(part.toStdString());
    for (const QString &line : m_args->toPlainText().split(QLatin1Char('\n'))) {
        if (!line.trimmed().isEmpty())
            result.args.push_back(line.trimmed().toStdString());
    }
    result.restartPolicy = m_restartPolicy->currentText().toStdString();
    result.chiefReplica = m_chief->isChecked();
    result.tokenSecret = m_tokenSecret->text().trimmed().toStdString();
    result.port = uint16_t(m_port->value());
    return result;
}

QString TfJobDialog::manifest(QString *error) const
{
    try {
        return QString::fromStdString(tfJobManifest(m_plan, settings()));
    } catch (const InputError &e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return {};
    }
}

void TfJobDialog::updatePreview()
{
    QString error;
    const QString text = manifest(&error);
    m_error->setText(error);
    m_error->setVisible(!error.isEmpty());
    // A wrong field keeps the last good manifest in view, greyed; only a
    // manifest that would start can be saved or copied.
    if (!text.isEmpty())
        m_preview->setPlainText(text);
    m_preview->setEnabled(!text.isEmpty());
    m_save->setEnabled(!text.isEmpty());
    m_copy->setEnabled(!text.isEmpty());
}

bool TfJobDialog::saveTo(const QString &path)
{
    QString error;
    const QString text = manifest(&error);
    if (text.isEmpty()) {
        m_error->setText(error);
        m_error->show();
        return false;
    }
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(text.toUtf8()) < 0 || !file.commit()) {
        m_error->setText(tr("cannot write %1: %2").arg(path, file.errorString()));
        m_error->show();
        return false;
    }
    return true;
}

void TfJobDialog::saveAs()
{
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save TFJob manifest"), QString::fromStdString(settings().name) + QStringLiteral("-tfjob.yaml"),
        tr("Kubernetes manifests (*.yaml *.yml)"));
    if (!path.isEmpty() && saveTo(path))
        accept();
}

} // namespace parasync::ui
