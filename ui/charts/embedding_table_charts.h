#pragma once

// The charts of a sparse model's table, from the ps tasks' answers
// (EmbeddingTablesSnapshot): how the table's rows and pulls split over the
// ps tasks (bars of their shares side by side), and the distribution of its
// rows' L2 norms (a histogram of every ps task's sampled rows). Each is
// exportable like the run's other charts.

#include "orchestration/embedding_tables.h"
#include "ui/charts/chart_widget.h"

#include <memory>
#include <string>

class QAreaSeries;
class QBarCategoryAxis;
class QBarSeries;
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace parasync::ui {

// What both charts draw from: the newest snapshot and the table shown.
class EmbeddingTableChart : public ChartWidget
{
    Q_OBJECT

public:
    using ChartWidget::ChartWidget;

    // The figures to draw, of the table named `table` (the first one when
    // the snapshot has no table of that name).
    void setTables(std::shared_ptr<const EmbeddingTablesSnapshot> tables, const std::string &table);
    int modeMarkerCount() const override { return 0; }

protected:
    // The table shown; null before any.
    const TableSummary *table() const;
    std::shared_ptr<const EmbeddingTablesSnapshot> m_tables;

private:
    std::string m_tableName;
};

// Each ps task's share of the table's rows and of its pulls, in %.
class PsShareChart : public EmbeddingTableChart
{
    Q_OBJECT

public:
    explicit PsShareChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("table_ps_shares"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(1000, 650); }
    // ps_task, rows, row_share, rows_pulled, pull_share.
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    QChart *m_chart;
    QChartView *m_view;
    QBarCategoryAxis *m_categoryAxis;
    QValueAxis *m_valueAxis;
    QBarSeries *m_bars;
};

// The rows' L2 norms: a histogram (share of the sampled rows per bin).
class RowNormChart : public EmbeddingTableChart
{
    Q_OBJECT

public:
    explicit RowNormChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("table_row_norms"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(1000, 650); }
    // norm_from, norm_to, rows_sampled, share.
    CsvTable csv() const override;
    // Bins drawn.
    int pointCount() const override { return m_bins; }
    // "512 of 2,785 rows sampled", under the norm axis.
    QString sampleText() const;

protected:
    void rebuild() override;

private:
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_normAxis;
    QValueAxis *m_shareAxis;
    QLineSeries *m_outline; // the bins' tops, as steps
    QAreaSeries *m_area;
    int m_bins = 0;
};

} // namespace parasync::ui
