// The Tables tab, offscreen: fed the ps tasks' answers as the watcher hands
// them on, it shows the table's rows, the imbalance in words, a row per ps
// task, the hottest ids with the ps task holding each, the row-norm
// histogram, and which ps task does not answer; it appears only for a model
// with tables, and its charts export with the run's others.
#include "orchestration/embedding_tables.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/embedding_table_charts.h"
#include "ui/charts/embedding_tables_view.h"
#include "ui/charts/run_charts_view.h"

#include <QComboBox>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QLocale>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::ui;

namespace {

TableFigures weights(int64_t rows, int64_t pulled, int64_t wireBytes, int64_t updates, std::vector<HotIdCount> hot,
                     float normScale)
{
    TableFigures figures;
    figures.name = "weights";
    figures.rows = rows;
    figures.payloadBytes = rows * 8;
    figures.memoryBytes = rows * 40;
    figures.rowsPulled = pulled;
    figures.rowsPushed = pulled;
    figures.wireBytes = wireBytes;
    figures.updates = updates;
    figures.hotIds = std::move(hot);
    for (int i = 0; i < 256; ++i)
        figures.rowNorms.push_back(normScale * float(i % 16) / 16.0f);
    return figures;
}

// Two polls of two ps tasks: ps:1 holds 1.8 times the mean rows (1800 of
// 2000), ps:0 the hottest id.
EmbeddingTablesTracker unevenCluster()
{
    EmbeddingTablesTracker tracker;
    tracker.setPsCount(2);
    tracker.recordAnswer(0, "127.0.0.1:2222", 1.0, {weights(150, 1000, 100000, 100, {{77, 400, 0}}, 0.5f)});
    tracker.recordAnswer(1, "127.0.0.1:2225", 1.0, {weights(1500, 3000, 300000, 100, {{5, 300, 3}}, 0.5f)});
    tracker.finishPoll();
    tracker.recordAnswer(0, "127.0.0.1:2222", 2.0, {weights(200, 2000, 150000, 150, {{77, 800, 0}}, 0.5f)});
    tracker.recordAnswer(1, "127.0.0.1:2225", 2.0, {weights(1800, 6000, 400000, 150, {{5, 600, 3}, {9, 50, 0}}, 0.5f)});
    tracker.finishPoll();
    return tracker;
}

QString cell(const QTableWidget *table, int row, int column)
{
    const QTableWidgetItem *item = table->item(row, column);
    return item ? item->text() : QString();
}

} // namespace

class TestEmbeddingTablesView : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void showsRowsImbalanceHotIdsAndNorms()
    {
        EmbeddingTablesView view;
        view.resize(1400, 600);
        view.show();
        QVERIFY(view.headline()->isHidden() || !view.headline()->isVisible());
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(unevenCluster().snapshot()));

        const QLocale locale;
        QVERIFY2(view.headline()->text().contains(QStringLiteral("'weights': %1 rows").arg(locale.toString(2000))),
                 qPrintable(view.headline()->text()));
        // ps:0 moved 50000 bytes in 50 updates, ps:1 100000: 3000 bytes a step together.
        QVERIFY2(view.headline()->text().contains(QStringLiteral("2.9 KiB over the wire a step")),
                 qPrintable(view.headline()->text()));
        QCOMPARE(view.rowImbalance()->text(), QStringLiteral("Rows: ps:1 holds 1.8× the mean rows"));
        // In the last second ps:1 served 3000 pulls, ps:0 1000.
        QCOMPARE(view.pullImbalance()->text(),
                 QStringLiteral("Pulls a second, last poll: ps:1 serves 1.5× the mean pulls"));
        QVERIFY(view.silentPsTasks()->isHidden());

        const QTableWidget *ps = view.psTable();
        QCOMPARE(ps->rowCount(), 2);
        QCOMPARE(cell(ps, 0, 0), QStringLiteral("ps:0"));
        QCOMPARE(cell(ps, 0, 1), locale.toString(200));
        QCOMPARE(cell(ps, 1, 1), locale.toString(1800));
        QCOMPARE(cell(ps, 1, 3), QStringLiteral("40.0 bytes"));                     // memory per row
        QCOMPARE(cell(ps, 0, 4), locale.toString(1000) + QStringLiteral(" bytes")); // 50000 bytes, 50 updates
        QCOMPARE(cell(ps, 1, 5), QStringLiteral("75.0 %"));                         // 6000 of 8000 pulls
        QCOMPARE(cell(ps, 1, 6), QStringLiteral("answering"));

        const QTableWidget *hot = view.hotIds();
        QCOMPARE(hot->rowCount(), 3);
        QCOMPARE(cell(hot, 0, 0), QStringLiteral("77"));
        QCOMPARE(cell(hot, 0, 1), QStringLiteral("10.0 %")); // 800 of 8000 pulls
        QCOMPARE(cell(hot, 0, 2), QStringLiteral("ps:0"));
        QCOMPARE(cell(hot, 1, 0), QStringLiteral("5"));
        QCOMPARE(cell(hot, 1, 2), QStringLiteral("ps:1"));
        QCOMPARE(cell(hot, 1, 1), QStringLiteral("7.46\u20137.50 %")); // 597 to 600 of 8000 pulls
        QCOMPARE(view.hotIdsTitle()->text(), QStringLiteral("Hottest ids (pulls, all ps tasks)"));

        RowNormChart *norms = view.normChart();
        norms->ensureUpToDate();
        QCOMPARE(norms->pointCount(), EmbeddingTablesTracker::kNormBins);
        QCOMPARE(norms->title(), QStringLiteral("Row norms of 'weights'"));
        QCOMPARE(norms->sampleText(),
                 QStringLiteral("%1 of %2 rows sampled").arg(locale.toString(512), locale.toString(2000)));
        int sampled = 0;
        for (const QStringList &row : norms->csv().rows)
            sampled += row.at(2).toInt();
        QCOMPARE(sampled, 512);
        PsShareChart *shares = view.shareChart();
        shares->ensureUpToDate();
        QCOMPARE(shares->pointCount(), 4); // rows and pulls of two ps tasks
        QCOMPARE(shares->csv().rows.at(1).at(2), QStringLiteral("0.9"));
    }

    // In the app's window the tab is short (about 440 pixels at 1440 x 900):
    // the splitter's share for the ps tasks' table once cut ps:1 of 2 in
    // half. Up to 4 ps tasks, every row shows whole.
    void everyPsTaskShowsWholeInAShortTab()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(4);
        for (int ps = 0; ps < 4; ++ps)
            tracker.recordAnswer(ps, "127.0.0.1:" + std::to_string(2222 + ps), 1.0,
                                 {weights(1000, 2000, 100000, 100, {{uint64_t(ps), 100, 0}}, 0.5f)});
        tracker.finishPoll();
        EmbeddingTablesView view;
        view.resize(1300, 380);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(tracker.snapshot()));
        const QTableWidget *ps = view.psTable();
        QCOMPARE(ps->rowCount(), 4);
        QTRY_VERIFY2(ps->viewport()->rect().contains(ps->visualItemRect(ps->item(3, 0))),
                     qPrintable(QStringLiteral("ps:3's row at %1, the view %2 pixels high")
                                    .arg(ps->visualItemRect(ps->item(3, 0)).bottom())
                                    .arg(ps->viewport()->height())));
        for (int row = 0; row < 4; ++row)
            QVERIFY(ps->viewport()->rect().contains(ps->visualItemRect(ps->item(row, 0))));
    }

    void aPsTaskThatStopsAnsweringIsSaidAndGreyed()
    {
        EmbeddingTablesTracker tracker = unevenCluster();
        tracker.recordAnswer(0, "127.0.0.1:2222", 9.0, {weights(260, 3000, 200000, 200, {{77, 900, 0}}, 0.5f)});
        tracker.recordSilence(1, "127.0.0.1:2225", 9.0, "ps:1 at 127.0.0.1:2225: connection refused");
        EmbeddingTablesView view;
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(tracker.snapshot()));
        QVERIFY(!view.silentPsTasks()->isHidden());
        QCOMPARE(view.silentPsTasks()->text(),
                 QStringLiteral(
                     "No answer for 7 s (its figures are that old) from ps:1 at 127.0.0.1:2225: connection refused"));
        const QTableWidget *ps = view.psTable();
        QCOMPARE(cell(ps, 1, 1), QLocale().toString(1800)); // its last figures stay
        QCOMPARE(cell(ps, 1, 6), QStringLiteral("not answering (7 s old)"));
        QCOMPARE(ps->item(1, 1)->foreground().color(), QColor(Qt::gray));
        QCOMPARE(cell(ps, 0, 6), QStringLiteral("answering"));
        QVERIFY(view.pullImbalance()->text().endsWith(QStringLiteral("\u2014")));
    }

    void hotIdsAPsTaskCannotTellAreSaidToBeUnknown()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        tracker.recordAnswer(0, "h:1", 1.0, {weights(100, 8000, 10, 100, {{3, 800, 799}, {4, 800, 799}}, 1.0f)});
        tracker.recordAnswer(1, "h:2", 1.0, {weights(100, 8000, 10, 100, {{5, 100, 0}}, 1.0f)});
        EmbeddingTablesView view;
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(tracker.snapshot()));
        QVERIFY2(view.hotIdsTitle()->text().contains(QStringLiteral("Not known on ps:0:")),
                 qPrintable(view.hotIdsTitle()->text()));
        QCOMPARE(cell(view.hotIds(), 0, 0), QStringLiteral("5"));
        QCOMPARE(cell(view.hotIds(), 1, 1), QStringLiteral("0.01\u20135.00 %")); // 1 to 800 of 16000 pulls
        QCOMPARE(view.hotIds()->item(1, 1)->toolTip(), QStringLiteral("pulled between 1 and 800 times"));
    }

    void twoTablesArePickedOneAtATime()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(1);
        TableFigures factors = weights(40, 10, 10, 1, {}, 2.0f);
        factors.name = "factors";
        tracker.recordAnswer(0, "h:1", 1.0, {weights(10, 10, 10, 1, {}, 0.5f), factors});
        EmbeddingTablesView view;
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(tracker.snapshot()));
        QCOMPARE(view.shownTable(), QStringLiteral("weights"));
        QVERIFY(!view.findChild<QComboBox *>(QStringLiteral("tablePicker"))->isHidden());
        view.showTable(QStringLiteral("factors"));
        QVERIFY2(view.headline()->text().startsWith(QStringLiteral("Table 'factors': 40 rows")),
                 qPrintable(view.headline()->text()));
        QCOMPARE(cell(view.psTable(), 0, 4), QStringLiteral("\u2014")); // one answer: no bytes per step yet
        // The next poll keeps the table chosen.
        view.setTables(std::make_shared<const EmbeddingTablesSnapshot>(tracker.snapshot()));
        QCOMPARE(view.shownTable(), QStringLiteral("factors"));
    }

    void theTabIsThereForAModelWithTablesAndExportsItsCharts()
    {
        RunChartsView charts;
        charts.resize(1400, 700);
        charts.show();
        const auto hasTab = [&charts] {
            for (int i = 0; i < charts.count(); ++i)
                if (charts.tabText(i) == QStringLiteral("Tables"))
                    return charts.isTabVisible(i);
            return false;
        };
        QVERIFY(!hasTab());
        const auto exported = [&charts](ExportableChart *chart) { return charts.charts().contains(chart); };
        QVERIFY(!exported(charts.tables()->normChart()));

        RunSnapshot sparse;
        sparse.signature.set_model("sparse_lr");
        sparse.signature.add_tables()->set_name("weights");
        charts.setSnapshot(sparse);
        charts.flush();
        QVERIFY(hasTab());
        QVERIFY(exported(charts.tables()->normChart()));
        QVERIFY(exported(charts.tables()->shareChart()));
        // Before the first poll, the tab says what will come.
        QVERIFY(charts.tables()->headline()->isHidden() || !charts.tables()->headline()->isVisible());

        charts.setTables(unevenCluster().snapshot());
        charts.setCurrentWidget(charts.tables());
        QVERIFY(charts.tables()->headline()->isVisible());
        QTemporaryDir dir;
        QString error;
        const QString png = dir.filePath(QStringLiteral("norms.png"));
        QVERIFY2(ChartExporter::exportPng(charts.tables()->normChart(), png, &error), qPrintable(error));
        QCOMPARE(QImage(png).size(), QSize(1000, 650));

        charts.clear();
        QVERIFY(!hasTab());
    }
};

QTEST_MAIN(TestEmbeddingTablesView)
#include "tst_embedding_tables_view.moc"
