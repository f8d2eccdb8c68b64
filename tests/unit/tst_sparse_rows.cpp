// Rows of tables as they travel and as a sync step sums them: a sum merges
// two workers' ids in order, the checks name what a hostile request got
// wrong, and a checkpoint's tables split over any number of ps tasks join
// back to the same bytes.
#include "engine/sparse_rows.h"

#include <QTest>

#include <vector>

using namespace parasync;

namespace {

TableRows rowsOf(int table, std::vector<uint64_t> ids, std::vector<float> values)
{
    return {table, {std::move(ids), std::move(values)}};
}

proto::SparseRows block(int table, const std::vector<uint64_t> &ids, size_t width)
{
    proto::SparseRows rows;
    rows.set_table(table);
    rows.mutable_ids()->Assign(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size() * width; ++i)
        rows.add_values(float(i));
    return rows;
}

proto::ModelSignature twoTables()
{
    proto::ModelSignature signature;
    for (const auto &[name, width] : {std::pair{"weights", 1}, std::pair{"factors", 3}}) {
        auto *table = signature.add_tables();
        table->set_name(name);
        table->set_row_width(width);
    }
    return signature;
}

} // namespace

class TestSparseRows : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aSumMergesIdsInOrder()
    {
        RowGradients sum;
        const RowGradients a{rowsOf(0, {1, 5, 9}, {1, 2, 3, 4, 5, 6})};
        const RowGradients b{rowsOf(0, {2, 5}, {10, 20, 30, 40}), rowsOf(2, {7}, {1, 1})};
        addRows(&sum, viewOf(a));
        addRows(&sum, viewOf(b));
        scaleRows(&sum, 0.5f);
        QCOMPARE(sum.size(), size_t(2));
        QCOMPARE(sum[0].table, 0);
        QCOMPARE(sum[0].rows.ids, (std::vector<uint64_t>{1, 2, 5, 9}));
        QCOMPARE(sum[0].rows.values, (std::vector<float>{0.5f, 1, 5, 10, 16.5f, 22, 2.5f, 3}));
        QCOMPARE(sum[1].table, 2);
        QCOMPARE(sum[1].rows.values, (std::vector<float>{0.5f, 0.5f}));
        QCOMPARE(rowCount(viewOf(sum)), int64_t(5));
    }

    void theChecksNameWhatIsWrong()
    {
        const std::vector<TableDeclaration> tables = tablesOf(twoTables());
        google::protobuf::RepeatedPtrField<proto::SparseRows> blocks;
        *blocks.Add() = block(0, {3, 4}, 1);
        *blocks.Add() = block(1, {2}, 3);
        QCOMPARE(rowBlocksProblem(blocks, tables, 0, 1, "row_gradients"), std::string());
        blocks[1].add_values(1);
        QVERIFY(rowBlocksProblem(blocks, tables, 0, 1, "row_gradients")
                    .find("row_gradients[1] ('factors') has 4 values for 1 ids, but the table's rows are 3 wide")
                != std::string::npos);
        blocks[1] = block(0, {8}, 1);
        QVERIFY(rowBlocksProblem(blocks, tables, 0, 1, "row_gradients").find("send one block per table, in table order")
                != std::string::npos);
        // With two ps tasks, a row the other holds.
        uint64_t theirs = 0;
        while (psOfRow(theirs, 2) != 1)
            ++theirs;
        google::protobuf::RepeatedPtrField<proto::RowRequest> pull;
        pull.Add()->add_ids(theirs);
        QVERIFY(rowRequestsProblem(pull, tables, 0, 2, "pull").find("lives on ps:1, not ps:0") != std::string::npos);
        QCOMPARE(rowRequestsProblem(pull, tables, 1, 2, "pull"), std::string());
    }

    void aCheckpointsTablesSplitOverAnyPsCountJoinBack()
    {
        const proto::ModelSignature signature = twoTables();
        // Whole tables as a checkpoint holds them: 100 rows each, with an
        // accumulator slot.
        google::protobuf::RepeatedPtrField<proto::TableState> whole;
        for (int t = 0; t < 2; ++t) {
            const int width = int(signature.tables(t).row_width());
            proto::TableState *table = whole.Add();
            table->set_name(signature.tables(t).name());
            table->add_slot_names("accumulator");
            for (uint64_t id = 0; id < 100; ++id) {
                table->add_ids(id * 7919);
                for (int j = 0; j < width; ++j) {
                    table->add_values(float(id) + 0.25f * float(j));
                    table->add_slots(float(id) * 2.0f);
                }
            }
        }
        for (const int numPs : {1, 2, 3, 5}) {
            std::vector<proto::ShardState> shards(static_cast<size_t>(numPs));
            splitTableStates(whole, &shards);
            for (int k = 0; k < numPs; ++k)
                for (const uint64_t id : shards[size_t(k)].tables(0).ids())
                    QCOMPARE(psOfRow(id, numPs), k);
            const std::vector<proto::TableState> joined = joinTableStates(shards, signature);
            QCOMPARE(joined.size(), size_t(2));
            for (int t = 0; t < 2; ++t)
                QVERIFY2(joined[size_t(t)].SerializeAsString() == whole[t].SerializeAsString(),
                         qPrintable(QStringLiteral("%1 ps tasks, table %2").arg(numPs).arg(t)));
        }
    }
};

QTEST_APPLESS_MAIN(TestSparseRows)
#include "tst_sparse_rows.moc"
