// MainWindow: what leaves the window -- every chart exported at once, one
// chart, the run report, the step trace, and the screenshots of every tab
// and dialog.

#include "ui/windows/main_window.h"

#include "ui/charts/chart_exporter.h"
#include "ui/charts/run_charts_view.h"
#include "ui/dialogs/cluster_designer_dialog.h"
#include "ui/dialogs/tfjob_dialog.h"

#include <QApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QStatusBar>
#include <QTabWidget>

namespace parasync::ui {

bool MainWindow::exportAllTo(const QString &directory, QStringList *written, QString *error)
{
    return m_charts->exportAll(directory, written, error);
}

void MainWindow::askExportAll()
{
    const QString parent = QFileDialog::getExistingDirectory(this, tr("Export every chart into a new folder in"));
    if (parent.isEmpty())
        return;
    const QString dir = QDir(parent).filePath(
        QStringLiteral("parasync_") + QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    QStringList written;
    QString error;
    if (!exportAllTo(dir, &written, &error)) {
        showError(tr("Export failed"), error);
        return;
    }
    statusBar()->showMessage(
        tr("Wrote %1 files (PNG, SVG, PDF, CSV, run report, trace) into %2").arg(written.size()).arg(dir), 15000);
}

void MainWindow::askExportReport()
{
    m_charts->flush();
    const auto snapshot = m_charts->snapshot();
    if (!snapshot) {
        showError(tr("Nothing to report"), tr("Start, connect to or open a run first."));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export the run report"),
                                                      QStringLiteral("run_report.pdf"), tr("PDF document (*.pdf)"));
    if (path.isEmpty())
        return;
    QString error;
    if (ChartExporter::exportRunReport(m_charts->charts(), *snapshot, m_runDirectory, path, &error))
        statusBar()->showMessage(tr("Wrote %1").arg(path), 8000);
    else
        showError(tr("Export failed"), error);
}

void MainWindow::askExportTrace()
{
    m_charts->flush();
    const auto snapshot = m_charts->snapshot();
    if (!snapshot) {
        showError(tr("Nothing to export"), tr("Start, connect to or open a run first."));
        return;
    }
    const QString path
        = QFileDialog::getSaveFileName(this, tr("Export the step timeline for chrome://tracing or Perfetto"),
                                       QStringLiteral("trace.json"), tr("Chrome trace (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    if (ChartExporter::exportTrace(*snapshot, path, &error))
        statusBar()->showMessage(tr("Wrote %1 (open it in ui.perfetto.dev or chrome://tracing)").arg(path), 8000);
    else
        showError(tr("Export failed"), error);
}

void MainWindow::exportOneChart(int index)
{
    const auto charts = m_charts->charts();
    if (index < 0 || index >= charts.size())
        return;
    ExportableChart *chart = charts[index];
    QString filter;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export %1").arg(chart->title()), chart->exportName() + QStringLiteral(".png"),
        tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf);;CSV table (*.csv)"), &filter);
    if (path.isEmpty())
        return;
    m_charts->flush();
    QString error;
    bool ok = false;
    if (path.endsWith(QStringLiteral(".svg"), Qt::CaseInsensitive))
        ok = ChartExporter::exportSvg(chart, path, &error);
    else if (path.endsWith(QStringLiteral(".pdf"), Qt::CaseInsensitive))
        ok = ChartExporter::exportPdf(chart, path, &error);
    else if (path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive))
        ok = ChartExporter::exportCsv(chart, path, &error);
    else
        ok = ChartExporter::exportPng(chart, path, &error);
    if (ok)
        statusBar()->showMessage(tr("Wrote %1").arg(path), 8000);
    else
        showError(tr("Export failed"), error);
}

QStringList MainWindow::saveScreenshots(const QString &directory)
{
    QStringList written;
    QDir().mkpath(directory);
    const int current = m_charts->currentIndex();
    for (int i = 0; i < m_charts->count(); ++i) {
        if (!m_charts->isTabVisible(i))
            continue; // the Tables tab of a dense model
        m_charts->setCurrentIndex(i);
        m_charts->flush();
        QApplication::processEvents();
        QString name = m_charts->tabText(i).toLower();
        name.replace(QLatin1Char(' '), QLatin1Char('_'));
        const QString path = QDir(directory).filePath(QStringLiteral("window_%1_%2.png").arg(i).arg(name));
        if (grab().save(path))
            written.append(path);
    }
    m_charts->setCurrentIndex(current);
    // The cluster designer, as "New cluster..." shows it.
    ClusterDesignerDialog designer(m_currentPlan ? *m_currentPlan : demoPlan(), m_currentClusterFile, this);
    designer.show();
    QApplication::processEvents();
    const QString path = QDir(directory).filePath(QStringLiteral("cluster_designer.png"));
    if (designer.grab().save(path))
        written.append(path);
    designer.close();
    // Its TFJob export, as the designer's button opens it.
    TfJobDialog tfJob(m_currentPlan ? *m_currentPlan : demoPlan(), this);
    tfJob.show();
    QApplication::processEvents();
    const QString tfJobPath = QDir(directory).filePath(QStringLiteral("tfjob_export.png"));
    if (tfJob.grab().save(tfJobPath))
        written.append(tfJobPath);
    tfJob.close();
    return written;
}

QStringList MainWindow::saveScreenshotsOfEveryWindow(const QString &directory)
{
    const QStringList own = saveScreenshots(directory);
    QStringList written;
    int n = 0;
    for (QWidget *top : QApplication::topLevelWidgets()) {
        if (top == this || !top->isVisible())
            continue;
        // A run window shows one tab at a time: take each, as for this window.
        auto *tabs = top->findChild<QTabWidget *>();
        const int tabCount = tabs ? tabs->count() : 1;
        for (int i = 0; i < tabCount; ++i) {
            QString name;
            if (tabs) {
                tabs->setCurrentIndex(i);
                QApplication::processEvents();
                name = QLatin1Char('_') + tabs->tabText(i).toLower().replace(QLatin1Char(' '), QLatin1Char('_'));
            }
            const QString path = directory + QStringLiteral("/other_window_%1%2.png").arg(n).arg(name);
            if (top->grab().save(path))
                written.append(path);
        }
        ++n;
        top->close();
    }
    return written + own;
}

} // namespace parasync::ui
