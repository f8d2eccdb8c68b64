#pragma once

// The Tables tab: a sparse model's embedding tables as the ps tasks hold
// them, live. Above, the table's rows and memory and, in words, how evenly
// the ps tasks share its rows and its pulls ("ps:1 holds 1.8× the mean
// rows", "even: within 3 %"), and which ps task does not answer. Below, a
// row per ps task (rows, memory, memory per row, bytes per step, share of
// the pulls, whether it answers), the hottest ids of all of them (id, share
// of the pulls, the ps task holding it), and two charts: rows and pulls by
// ps task, and the rows' norm distribution. A table picker when the model
// has more than one.

#include "orchestration/embedding_tables.h"

#include <QWidget>

#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QTableWidget;

namespace parasync::ui {

class ChartWidget;
class PsShareChart;
class RowNormChart;

class EmbeddingTablesView : public QWidget
{
    Q_OBJECT

public:
    explicit EmbeddingTablesView(QWidget *parent = nullptr);

    void setTables(std::shared_ptr<const EmbeddingTablesSnapshot> tables);
    std::shared_ptr<const EmbeddingTablesSnapshot> tables() const { return m_tables; }
    void clear();

    // The table shown (its name; empty before any).
    QString shownTable() const;
    void showTable(const QString &name);

    // What the tab shows, for tests and the exporter.
    QLabel *headline() const { return m_headline; }
    QLabel *rowImbalance() const { return m_rowImbalance; }
    QLabel *pullImbalance() const { return m_pullImbalance; }
    QLabel *silentPsTasks() const { return m_silent; }
    QTableWidget *psTable() const { return m_psTable; }
    QTableWidget *hotIds() const { return m_hotIds; }
    QLabel *hotIdsTitle() const { return m_hotIdsTitle; }
    PsShareChart *shareChart() const { return m_shares; }
    RowNormChart *normChart() const { return m_norms; }
    // The two charts, in the order "Export all" writes them.
    std::vector<ChartWidget *> charts() const;

private:
    void refresh();
    void fillPsTable(const TableSummary &table);
    void fillHotIds(const TableSummary &table);

    std::shared_ptr<const EmbeddingTablesSnapshot> m_tables;
    QComboBox *m_tablePicker;
    QLabel *m_placeholder;
    QWidget *m_content;
    QLabel *m_headline;
    QLabel *m_rowImbalance;
    QLabel *m_pullImbalance;
    QLabel *m_silent;
    QTableWidget *m_psTable;
    QTableWidget *m_hotIds;
    QLabel *m_hotIdsTitle;
    PsShareChart *m_shares;
    RowNormChart *m_norms;
};

} // namespace parasync::ui
