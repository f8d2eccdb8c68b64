#include "ui/charts/embedding_tables_view.h"

#include "ui/charts/embedding_table_charts.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QScrollBar>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

namespace {

QString sizeText(double bytes)
{
    return QLocale().formattedDataSize(qint64(std::llround(bytes)), 1, QLocale::DataSizeIecFormat);
}

QString percentText(double share)
{
    return QStringLiteral("%1 %").arg(100 * share, 0, 'f', share < 0.1 ? 2 : 1);
}

QTableWidget *newTable(const QStringList &header, QWidget *parent)
{
    auto *table = new QTableWidget(0, int(header.size()), parent);
    table->setHorizontalHeaderLabels(header);
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->setSelectionMode(QAbstractItemView::NoSelection);
    table->setFocusPolicy(Qt::NoFocus);
    table->setAlternatingRowColors(true);
    table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table->horizontalHeader()->setStretchLastSection(true);
    return table;
}

// Sets row `row` of `table` to `cells`, numbers right-aligned, in grey
// when `stale`.
void setRow(QTableWidget *table, int row, const QStringList &cells, bool stale, const QString &toolTip = {})
{
    for (int column = 0; column < int(cells.size()); ++column) {
        QTableWidgetItem *item = table->item(row, column);
        if (!item) {
            item = new QTableWidgetItem;
            table->setItem(row, column, item);
        }
        item->setText(cells[column]);
        item->setTextAlignment(column == 0 || column == int(cells.size()) - 1 ? Qt::AlignLeft | Qt::AlignVCenter
                                                                              : Qt::AlignRight | Qt::AlignVCenter);
        item->setForeground(stale ? QBrush(Qt::gray) : QBrush());
        item->setToolTip(toolTip);
    }
}

QLabel *newLabel(const QString &objectName, QWidget *parent)
{
    auto *label = new QLabel(parent);
    label->setObjectName(objectName);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return label;
}

} // namespace

EmbeddingTablesView::EmbeddingTablesView(QWidget *parent)
    : QWidget(parent)
    , m_tablePicker(new QComboBox(this))
    , m_placeholder(new QLabel(this))
    , m_content(new QWidget(this))
    , m_headline(newLabel(QStringLiteral("tablesHeadline"), m_content))
    , m_rowImbalance(newLabel(QStringLiteral("rowImbalance"), m_content))
    , m_pullImbalance(newLabel(QStringLiteral("pullImbalance"), m_content))
    , m_silent(newLabel(QStringLiteral("silentPsTasks"), m_content))
    , m_psTable(newTable({tr("ps task"), tr("rows"), tr("memory"), tr("memory / row"), tr("bytes / step"),
                          tr("share of rows pulled"), tr("state")},
                         m_content))
    , m_hotIds(newTable({tr("id"), tr("share of rows pulled"), tr("ps task")}, m_content))
    , m_hotIdsTitle(newLabel(QStringLiteral("hotIdsTitle"), m_content))
    , m_shares(new PsShareChart(m_content))
    , m_norms(new RowNormChart(m_content))
{
    m_placeholder->setText(tr("The ps tasks' embedding tables show here once the chief has initialised them "
                              "(each ps task is asked about once a second)."));
    m_placeholder->setAlignment(Qt::AlignCenter);
    m_placeholder->setWordWrap(true);
    m_placeholder->setStyleSheet(QStringLiteral("color: gray"));
    m_psTable->setObjectName(QStringLiteral("psTables"));
    m_hotIds->setObjectName(QStringLiteral("hotIds"));
    m_tablePicker->setObjectName(QStringLiteral("tablePicker"));
    QFont bold = m_headline->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.15);
    m_headline->setFont(bold);
    m_silent->setWordWrap(true);
    m_silent->setStyleSheet(QStringLiteral("QLabel { background: #fff3cd; color: #5c4400; border: 1px solid "
                                           "#e0c060; padding: 4px; }"));
    m_silent->hide();

    auto *top = new QHBoxLayout;
    top->addWidget(m_headline, 1);
    top->addWidget(m_tablePicker);
    auto *balance = new QHBoxLayout;
    balance->addWidget(m_rowImbalance);
    balance->addSpacing(24);
    balance->addWidget(m_pullImbalance, 1);

    auto *hotBox = new QWidget(m_content);
    auto *hotLayout = new QVBoxLayout(hotBox);
    hotLayout->setContentsMargins(0, 0, 0, 0);
    m_hotIdsTitle->setWordWrap(true);
    hotLayout->addWidget(m_hotIdsTitle);
    hotLayout->addWidget(m_hotIds, 1);
    auto *left = new QSplitter(Qt::Vertical, m_content);
    left->addWidget(m_psTable);
    left->addWidget(hotBox);
    left->setStretchFactor(0, 2);
    left->setStretchFactor(1, 3);
    auto *splitter = new QSplitter(Qt::Horizontal, m_content);
    splitter->addWidget(left);
    splitter->addWidget(m_shares);
    splitter->addWidget(m_norms);
    m_shares->setMinimumWidth(300);
    m_norms->setMinimumWidth(300);
    splitter->setSizes({560, 420, 420});

    auto *content = new QVBoxLayout(m_content);
    content->setContentsMargins(6, 6, 6, 0);
    content->addLayout(top);
    content->addLayout(balance);
    content->addWidget(m_silent);
    content->addWidget(splitter, 1);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_placeholder);
    layout->addWidget(m_content, 1);
    m_content->hide();

    connect(m_tablePicker, &QComboBox::currentTextChanged, this, [this] { refresh(); });
}

std::vector<ChartWidget *> EmbeddingTablesView::charts() const
{
    return {m_shares, m_norms};
}

void EmbeddingTablesView::setTables(std::shared_ptr<const EmbeddingTablesSnapshot> tables)
{
    m_tables = std::move(tables);
    // The picker lists the tables; the one shown stays chosen.
    QStringList names;
    if (m_tables)
        for (const TableSummary &table : m_tables->tables)
            names << QString::fromStdString(table.name);
    QStringList listed;
    for (int i = 0; i < m_tablePicker->count(); ++i)
        listed << m_tablePicker->itemText(i);
    if (names != listed) {
        const QString shown = m_tablePicker->currentText();
        const QSignalBlocker blocker(m_tablePicker);
        m_tablePicker->clear();
        m_tablePicker->addItems(names);
        m_tablePicker->setCurrentIndex(std::max(0, int(names.indexOf(shown))));
    }
    m_tablePicker->setVisible(names.size() > 1);
    refresh();
}

void EmbeddingTablesView::clear()
{
    setTables(nullptr);
}

QString EmbeddingTablesView::shownTable() const
{
    return m_tablePicker->currentText();
}

void EmbeddingTablesView::showTable(const QString &name)
{
    m_tablePicker->setCurrentText(name);
}

void EmbeddingTablesView::refresh()
{
    const TableSummary *table = nullptr;
    if (m_tables)
        for (const TableSummary &candidate : m_tables->tables)
            if (!table || QString::fromStdString(candidate.name) == shownTable())
                table = &candidate;
    m_placeholder->setVisible(!table);
    m_content->setVisible(table != nullptr);
    m_shares->setTables(m_tables, shownTable().toStdString());
    m_norms->setTables(m_tables, shownTable().toStdString());
    if (!table) {
        m_psTable->setRowCount(0);
        m_hotIds->setRowCount(0);
        return;
    }
    const QLocale locale;
    const size_t numPs = m_tables->ps.size();
    QString headline
        = tr("Table '%1': %2 rows, %3 on %4")
              .arg(QString::fromStdString(table->name), locale.toString(qint64(table->rows)),
                   sizeText(double(table->memoryBytes)), numPs == 1 ? tr("1 ps task") : tr("%1 ps tasks").arg(numPs));
    // Each step of a worker goes to every ps task: a step's bytes are theirs together.
    double perStep = 0;
    bool everyPerStep = true;
    for (const auto &figures : table->byPs) {
        everyPerStep = everyPerStep && figures && figures->bytesPerStep;
        if (figures && figures->bytesPerStep)
            perStep += *figures->bytesPerStep;
    }
    if (everyPerStep)
        headline += tr(" \u00b7 %1 over the wire a step").arg(sizeText(perStep));
    m_headline->setText(headline);
    m_rowImbalance->setText(tr("Rows: %1")
                                .arg(QString::fromStdString(describeImbalance(
                                    table->rowImbalance, tr("holds").toStdString(), tr("rows").toStdString()))));
    m_pullImbalance->setText(tr("Pulls a second, last poll: %1")
                                 .arg(QString::fromStdString(describeImbalance(
                                     table->pullImbalance, tr("serves").toStdString(), tr("pulls").toStdString()))));

    QStringList silent;
    for (size_t i = 0; i < numPs; ++i) {
        const PsTaskTables &ps = m_tables->ps[i];
        if (ps.answering)
            continue;
        silent << (ps.everAnswered ? tr("No answer for %1 s (its figures are that old) from %2")
                                         .arg(std::llround(ps.secondsSinceAnswer))
                                         .arg(QString::fromStdString(ps.problem))
                                   : tr("No answer yet from %1").arg(QString::fromStdString(ps.problem)));
    }
    m_silent->setText(silent.join(QLatin1Char('\n')));
    m_silent->setVisible(!silent.isEmpty());
    fillPsTable(*table);
    fillHotIds(*table);
}

void EmbeddingTablesView::fillPsTable(const TableSummary &table)
{
    const QLocale locale;
    const QString none = QStringLiteral("\u2014");
    m_psTable->setRowCount(int(table.byPs.size()));
    for (size_t i = 0; i < table.byPs.size(); ++i) {
        const PsTaskTables &ps = m_tables->ps.at(i);
        QString state = ps.answering      ? tr("answering")
                        : ps.everAnswered ? tr("not answering (%1 s old)").arg(std::llround(ps.secondsSinceAnswer))
                                          : tr("not answering");
        const auto &figures = table.byPs[i];
        QStringList cells = {QStringLiteral("ps:%1").arg(i)};
        if (figures)
            cells << locale.toString(qint64(figures->rows)) << sizeText(double(figures->memoryBytes))
                  << (figures->memoryPerRow ? tr("%1 bytes").arg(*figures->memoryPerRow, 0, 'f', 1) : none)
                  << (figures->bytesPerStep ? sizeText(*figures->bytesPerStep) : none)
                  << percentText(figures->pullShare);
        else
            cells << none << none << none << none << none;
        cells << state;
        setRow(m_psTable, int(i), cells, !ps.answering, QString::fromStdString(ps.address));
    }
    // As tall as its rows (up to 8), the rest of the column for the hot ids;
    // never so short that the splitter's share for it hides one of the
    // first 4 (a window of 900 pixels showed ps:1 of 2 cut in half). The
    // horizontal scroll bar, when the columns are wider than the view,
    // takes its height from the rows otherwise.
    int chrome = m_psTable->horizontalHeader()->height() + 2 * m_psTable->frameWidth() + 2;
    if (m_psTable->horizontalHeader()->length() > m_psTable->viewport()->width())
        chrome += m_psTable->horizontalScrollBar()->sizeHint().height();
    const auto heightOf = [&](int rows) {
        int height = chrome;
        for (int row = 0; row < std::min(rows, m_psTable->rowCount()); ++row)
            height += m_psTable->rowHeight(row);
        return height;
    };
    m_psTable->setMinimumHeight(heightOf(4));
    m_psTable->setMaximumHeight(heightOf(8));
}

void EmbeddingTablesView::fillHotIds(const TableSummary &table)
{
    QStringList uncertain;
    for (size_t i = 0; i < table.byPs.size(); ++i)
        if (table.byPs[i] && table.byPs[i]->hotIdsUncertain)
            uncertain << QStringLiteral("ps:%1").arg(i);
    m_hotIdsTitle->setText(
        uncertain.isEmpty()
            ? tr("Hottest ids (pulls, all ps tasks)")
            : tr("Hottest ids (pulls, all ps tasks). Not known on %1: more of its ids are pulled about equally "
                 "often than its summary can hold; their counts are mostly error (listed last, as ranges).")
                  .arg(uncertain.join(QStringLiteral(", "))));
    m_hotIds->setRowCount(int(table.hottest.size()));
    for (size_t i = 0; i < table.hottest.size(); ++i) {
        const HotIdShare &hot = table.hottest[i];
        const bool stale = size_t(hot.psIndex) < m_tables->ps.size() && !m_tables->ps[size_t(hot.psIndex)].answering;
        // A count that is partly error is a range: between the sure pulls and all it may have had.
        const QString share
            = hot.error == 0
                  ? percentText(hot.share)
                  : QStringLiteral("%1\u2013%2").arg(percentText(hot.surelyShare).chopped(2), percentText(hot.share));
        const QString toolTip = hot.error == 0 ? tr("pulled %1 times").arg(QLocale().toString(qint64(hot.count)))
                                               : tr("pulled between %1 and %2 times")
                                                     .arg(QLocale().toString(qint64(hot.count - hot.error)),
                                                          QLocale().toString(qint64(hot.count)));
        setRow(m_hotIds, int(i), {QString::number(hot.id), share, QStringLiteral("ps:%1").arg(hot.psIndex)}, stale,
               toolTip);
    }
}

} // namespace parasync::ui
