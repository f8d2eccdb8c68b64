// A sparse model's tables as the app shows them, from the ps tasks' answers
// (TaskStatusResponse.tables): bytes per step from two answers, memory per
// row, the imbalance across ps tasks in words, the hottest ids of all of
// them, one histogram of row norms, and a ps task that stops answering.
// No processes.
#include "orchestration/embedding_tables.h"
#include "proto/parasync.pb.h"

#include <QTest>

#include <limits>

using namespace parasync;

namespace {

TableFigures table(const std::string &name, int64_t rows, int64_t pulled, int64_t wireBytes, int64_t updates)
{
    TableFigures figures;
    figures.name = name;
    figures.rows = rows;
    figures.payloadBytes = rows * 8;
    figures.memoryBytes = rows * 24;
    figures.rowsPulled = pulled;
    figures.rowsPushed = pulled;
    figures.wireBytes = wireBytes;
    figures.updates = updates;
    return figures;
}

const TableSummary &only(const EmbeddingTablesSnapshot &snapshot)
{
    if (snapshot.tables.size() != 1)
        qFatal("expected one table, got %d", int(snapshot.tables.size()));
    return snapshot.tables.front();
}

} // namespace

class TestEmbeddingTables : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void bytesPerStepNeedsTwoAnswersAndIsWireBytesOverUpdates()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(1);
        tracker.recordAnswer(0, "h:1", 10.0, {table("weights", 100, 1000, 50000, 10)});
        QVERIFY(!only(tracker.snapshot()).byPs[0]->bytesPerStep.has_value());
        QVERIFY(!only(tracker.snapshot()).byPs[0]->pullsPerSecond.has_value());

        tracker.recordAnswer(0, "h:1", 12.0, {table("weights", 150, 3000, 90000, 30)});
        const PsTableFigures figures = *only(tracker.snapshot()).byPs[0];
        QCOMPARE(*figures.bytesPerStep, 2000.0); // 40000 bytes over 20 updates
        QCOMPARE(*figures.pullsPerSecond, 1000.0);
        QCOMPARE(*figures.memoryPerRow, 24.0);
        QCOMPARE(figures.rows, int64_t(150));

        // No update between two answers (a finished run): the last figure stays.
        tracker.recordAnswer(0, "h:1", 13.0, {table("weights", 150, 3000, 90000, 30)});
        QCOMPARE(*only(tracker.snapshot()).byPs[0]->bytesPerStep, 2000.0);
    }

    void aRestartedPsTaskStartsItsFiguresAfresh()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(1);
        tracker.recordAnswer(0, "h:1", 1.0, {table("weights", 100, 1000, 50000, 10)});
        tracker.recordAnswer(0, "h:1", 2.0, {table("weights", 120, 2000, 60000, 20)});
        QVERIFY(only(tracker.snapshot()).byPs[0]->bytesPerStep.has_value());
        tracker.recordAnswer(0, "h:1", 3.0, {table("weights", 5, 10, 300, 1)});
        QVERIFY(!only(tracker.snapshot()).byPs[0]->bytesPerStep.has_value());
        QVERIFY(!only(tracker.snapshot()).byPs[0]->pullsPerSecond.has_value());
    }

    void imbalanceIsMaxOverMeanInWords_data()
    {
        QTest::addColumn<std::vector<double>>("values");
        QTest::addColumn<QString>("words");
        QTest::newRow("even") << std::vector<double>{1000, 1030} << QStringLiteral("even: within 2 %");
        QTest::newRow("exactly even") << std::vector<double>{500, 500} << QStringLiteral("even: within 1 %");
        QTest::newRow("ps:1 heavy") << std::vector<double>{200, 1800}
                                    << QStringLiteral("ps:1 holds 1.8× the mean rows");
        QTest::newRow("slightly") << std::vector<double>{930, 1070} << QStringLiteral("ps:1 holds 1.07× the mean rows");
        QTest::newRow("three, ps:0 heavy")
            << std::vector<double>{600, 200, 100} << QStringLiteral("ps:0 holds 2.0× the mean rows");
        QTest::newRow("nothing yet") << std::vector<double>{0, 0} << QStringLiteral("—");
    }

    void imbalanceIsMaxOverMeanInWords()
    {
        QFETCH(std::vector<double>, values);
        QFETCH(QString, words);
        QCOMPARE(QString::fromStdString(describeImbalance(imbalanceOf(values), "holds", "rows")), words);
    }

    void imbalanceAcrossPsTasksOfRowsAndOfPullsPerInterval()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        tracker.recordAnswer(0, "h:1", 1.0, {table("weights", 1000, 10000, 1, 1)});
        tracker.recordAnswer(1, "h:2", 1.0, {table("weights", 3000, 10000, 1, 1)});
        EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        QCOMPARE(only(snapshot).rows, int64_t(4000));
        QVERIFY(only(snapshot).rowImbalance.known);
        QCOMPARE(only(snapshot).rowImbalance.psIndex, 1);
        QCOMPARE(only(snapshot).rowImbalance.ratio, 1.5);
        QCOMPARE(only(snapshot).byPs[1]->rowShare, 0.75);
        QVERIFY(!only(snapshot).pullImbalance.known); // one answer each: no interval yet

        // In the next second ps:0 served three times the pulls of ps:1:
        // the interval's imbalance, though the totals since the start are close.
        tracker.recordAnswer(0, "h:1", 2.0, {table("weights", 1000, 13000, 2, 2)});
        tracker.recordAnswer(1, "h:2", 2.0, {table("weights", 3000, 11000, 2, 2)});
        snapshot = tracker.snapshot();
        QVERIFY(only(snapshot).pullImbalance.known);
        QCOMPARE(only(snapshot).pullImbalance.psIndex, 0);
        QCOMPARE(only(snapshot).pullImbalance.ratio, 1.5); // 3000 against a mean of 2000
        QCOMPARE(only(snapshot).byPs[0]->pullShare, 13000.0 / 24000.0);
        QCOMPARE(QString::fromStdString(describeImbalance(only(snapshot).pullImbalance, "serves", "pulls")),
                 QStringLiteral("ps:0 serves 1.5× the mean pulls"));
    }

    void hottestIdsMergedAcrossPsTasksWithShareAndHolder()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        TableFigures a = table("weights", 10, 600, 1, 1);
        a.hotIds = {{7, 300, 0}, {9, 50, 2}};
        TableFigures b = table("weights", 10, 400, 1, 1);
        b.hotIds = {{42, 200, 1}, {11, 100, 0}};
        tracker.recordAnswer(0, "h:1", 1.0, {a});
        tracker.recordAnswer(1, "h:2", 1.0, {b});
        const EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        const auto &hottest = only(snapshot).hottest;
        QCOMPARE(hottest.size(), size_t(4));
        QCOMPARE(hottest[0].id, uint64_t(7));
        QCOMPARE(hottest[0].psIndex, 0);
        QCOMPARE(hottest[0].share, 0.3); // of the 1000 pulls of both ps tasks
        QCOMPARE(hottest[1].id, uint64_t(42));
        QCOMPARE(hottest[1].psIndex, 1);
        QCOMPARE(hottest[1].error, int64_t(1));
        QCOMPARE(hottest[2].id, uint64_t(11));
        QCOMPARE(hottest[3].id, uint64_t(9));
    }

    void anIdWhoseCountIsMostlyErrorComesAfterTheSureOnes()
    {
        // ps:0's summary churns: its top id entered in place of another and
        // may have been pulled once, or 1000 times.
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        TableFigures a = table("weights", 10, 5000, 1, 1000);
        a.hotIds = {{1, 1000, 999}};
        TableFigures b = table("weights", 10, 5000, 1, 1000);
        b.hotIds = {{2, 600, 0}};
        tracker.recordAnswer(0, "h:1", 1.0, {a});
        tracker.recordAnswer(1, "h:2", 1.0, {b});
        const EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        const auto &hottest = only(snapshot).hottest;
        QCOMPARE(hottest.size(), size_t(2));
        QCOMPARE(hottest[0].id, uint64_t(2));
        QCOMPARE(hottest[0].share, 0.06);
        QCOMPARE(hottest[0].surelyShare, 0.06);
        QCOMPARE(hottest[1].id, uint64_t(1));
        QCOMPARE(hottest[1].share, 0.1);
        QCOMPARE(hottest[1].surelyShare, 0.0001);
        QVERIFY(only(snapshot).byPs[0]->hotIdsUncertain);
        QVERIFY(!only(snapshot).byPs[1]->hotIdsUncertain);
    }

    void hotIdsInEveryStepTieAcrossPsTasksAnsweringStepsApart()
    {
        // ps:0 answered at step 100, ps:1 at step 98: ids 10, 20 and 30
        // were in every step's batch, 40 in half of them.
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        TableFigures a = table("weights", 10, 1000, 1, 100);
        a.hotIds = {{30, 100, 0}, {10, 100, 0}, {40, 50, 0}};
        TableFigures b = table("weights", 10, 980, 1, 98);
        b.hotIds = {{20, 98, 0}};
        tracker.recordAnswer(0, "h:1", 1.0, {a});
        tracker.recordAnswer(1, "h:2", 1.0, {b});
        const EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        const auto &hottest = only(snapshot).hottest;
        QCOMPARE(hottest.size(), size_t(4));
        QCOMPARE(hottest[0].id, uint64_t(10));
        QCOMPARE(hottest[1].id, uint64_t(20));
        QCOMPARE(hottest[1].psIndex, 1);
        QCOMPARE(hottest[1].perUpdate, 1.0);
        QCOMPARE(hottest[2].id, uint64_t(30));
        QCOMPARE(hottest[3].id, uint64_t(40));
    }

    void rowNormsOfAllPsTasksInOneHistogram()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        TableFigures a = table("factors", 10, 1, 1, 1);
        a.rowNorms = {0.0f, 0.1f, 0.2f};
        TableFigures b = table("factors", 10, 1, 1, 1);
        b.rowNorms = {1.0f, 0.9f, std::numeric_limits<float>::quiet_NaN()};
        tracker.recordAnswer(0, "h:1", 1.0, {a});
        tracker.recordAnswer(1, "h:2", 1.0, {b});
        const NormHistogram norms = only(tracker.snapshot()).norms;
        QCOMPARE(norms.samples, 5); // the NaN is no row norm
        QCOMPARE(norms.lower, 0.0);
        QCOMPARE(norms.upper, 1.0);
        QCOMPARE(int(norms.counts.size()), EmbeddingTablesTracker::kNormBins);
        QCOMPARE(norms.counts.front(), 1);
        QCOMPARE(norms.counts.back(), 1); // the largest, 1.0, closes the last bin
        int total = 0;
        for (int count : norms.counts)
            total += count;
        QCOMPARE(total, 5);
    }

    void histogramOfEqualNormsIsOneBin()
    {
        const NormHistogram histogram = histogramOf({0.5f, 0.5f, 0.5f}, 20);
        QCOMPARE(histogram.counts, std::vector<int>{3});
        QVERIFY(histogram.upper > histogram.lower);
        QCOMPARE(histogramOf({}, 20).samples, 0);
    }

    void aSilentPsTaskKeepsItsLastFiguresMarkedAsNotAnswering()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        tracker.recordAnswer(0, "h:1", 1.0, {table("weights", 100, 100, 10, 1)});
        tracker.recordAnswer(1, "h:2", 1.0, {table("weights", 120, 100, 10, 1)});
        tracker.recordAnswer(0, "h:1", 2.0, {table("weights", 110, 200, 20, 2)});
        tracker.recordSilence(1, "h:2", 2.0, "ps:1 at h:2: connection refused");
        tracker.recordAnswer(0, "h:1", 4.0, {table("weights", 130, 400, 40, 4)});
        tracker.recordSilence(1, "h:2", 4.0, "ps:1 at h:2: connection refused");
        const EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        QVERIFY(snapshot.ps[0].answering);
        QVERIFY(!snapshot.ps[1].answering);
        QVERIFY(snapshot.ps[1].everAnswered);
        QCOMPARE(snapshot.ps[1].problem, std::string("ps:1 at h:2: connection refused"));
        QCOMPARE(snapshot.ps[1].secondsSinceAnswer, 3.0);
        QCOMPARE(only(snapshot).byPs[1]->rows, int64_t(120)); // its last figures
        QCOMPARE(only(snapshot).byPs[0]->rows, int64_t(130));
        // The rows of both, the pulls of the one that answers alone: no balance.
        QVERIFY(only(snapshot).rowImbalance.known);
        QVERIFY(!only(snapshot).pullImbalance.known);
    }

    void aPsTaskNeverHeardFromHasNoFigures()
    {
        EmbeddingTablesTracker tracker;
        tracker.setPsCount(2);
        tracker.recordAnswer(0, "h:1", 1.0, {table("weights", 100, 100, 10, 1)});
        tracker.recordSilence(1, "h:2", 1.0, "ps:1 at h:2: deadline exceeded");
        const EmbeddingTablesSnapshot snapshot = tracker.snapshot();
        QVERIFY(!snapshot.ps[1].everAnswered);
        QCOMPARE(only(snapshot).byPs.size(), size_t(2));
        QVERIFY(!only(snapshot).byPs[1].has_value());
        QVERIFY(!only(snapshot).rowImbalance.known); // ps:1's rows are unknown, not none
    }

    void tablesComeFromTheTaskStatusAnswer()
    {
        proto::TaskStatusResponse status;
        auto *weights = status.add_tables();
        weights->set_name("weights");
        weights->set_rows(5);
        weights->set_memory_bytes(4096);
        weights->set_wire_bytes(777);
        weights->set_updates(3);
        auto *hot = weights->add_hot_ids();
        hot->set_id(0xfedcba9876543210ULL);
        hot->set_count(9);
        weights->add_row_norms(0.25f);
        status.add_tables()->set_name("factors");
        const std::vector<TableFigures> tables = tableFiguresOf(status);
        QCOMPARE(tables.size(), size_t(2));
        QCOMPARE(tables[0].name, std::string("weights"));
        QCOMPARE(tables[0].memoryBytes, int64_t(4096));
        QCOMPARE(tables[0].hotIds.at(0).id, uint64_t(0xfedcba9876543210ULL));
        QCOMPARE(tables[0].rowNorms, std::vector<float>{0.25f});
        QCOMPARE(tables[1].name, std::string("factors"));
    }
};

QTEST_GUILESS_MAIN(TestEmbeddingTables)
#include "tst_embedding_tables.moc"
