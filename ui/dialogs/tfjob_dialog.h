#pragma once

// Exports a designed cluster as a Kubeflow TFJob manifest: the person fills
// in the image, the command and args (prefilled with the design's training
// flags), the restart policy and the token Secret, and sees the YAML as it
// will be written.

#include "config/cluster_plan.h"
#include "kubeflow/tfjob_manifest.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace parasync::ui {

class TfJobDialog : public QDialog
{
    Q_OBJECT

public:
    explicit TfJobDialog(const ClusterPlan &plan, QWidget *parent = nullptr);

    // The settings as filled in.
    TfJobSettings settings() const;
    // The manifest, or an empty string with `error` naming the wrong field.
    QString manifest(QString *error) const;
    // Writes the manifest to `path`; false with the message shown in the dialog.
    bool saveTo(const QString &path);

private:
    void updatePreview();
    void saveAs();

    ClusterPlan m_plan;
    QLineEdit *m_name;
    QLineEdit *m_namespace;
    QLineEdit *m_image;
    QLineEdit *m_command;
    QPlainTextEdit *m_args;
    QComboBox *m_restartPolicy;
    QCheckBox *m_chief;
    QLineEdit *m_tokenSecret;
    QSpinBox *m_port;
    QPlainTextEdit *m_preview;
    QLabel *m_error;
    QPushButton *m_save = nullptr;
    QPushButton *m_copy = nullptr;
};

} // namespace parasync::ui
