// A ps task's shard in pieces that fit a message (formats/shard_pieces.h): cut
// at any message size and joined again it is the same bytes, no piece is
// over its share of the limit, and pieces a hostile or broken sender cut
// wrong are refused with what is wrong.
#include "formats/shard_pieces.h"

#include <QTest>

#include <vector>

using namespace parasync;

namespace {

// A shard of two tables (rows of 1 and of 3 floats, one slot each), an
// empty one, and a dense variable.
proto::ShardState shardOf(int rowsPerTable)
{
    proto::ShardState shard;
    shard.set_ps_index(2);
    auto *variable = shard.add_variables();
    variable->set_name("bias");
    variable->mutable_value()->add_values(0.5f);
    for (const auto &[name, width] : {std::pair{"weights", 1}, std::pair{"empty", 4}, std::pair{"factors", 3}}) {
        auto *table = shard.add_tables();
        table->set_name(name);
        table->add_slot_names("accumulator");
        if (std::string(name) == "empty")
            continue;
        for (int i = 0; i < rowsPerTable; ++i) {
            table->add_ids(uint64_t(i) * 7 + 3);
            for (int c = 0; c < width; ++c) {
                table->add_values(float(i) + float(c) / 8);
                table->add_slots(float(i) * 2 + float(c));
            }
        }
    }
    return shard;
}

// Cut as a sender cuts, joined as a receiver joins.
proto::ShardState cutAndJoin(const proto::ShardState &whole, int64_t maxMessageBytes, int64_t *pieces,
                             int64_t *largestPiece)
{
    proto::ShardState head = whole;
    TableStates rows;
    takeTableRows(head.mutable_tables(), &rows);
    *pieces = 0;
    *largestPiece = 0;
    forEachRowPiece(rows, pieceBytesWithin(maxMessageBytes), [&](proto::TableState &piece) {
        ++*pieces;
        *largestPiece = std::max(*largestPiece, int64_t(piece.ByteSizeLong()));
        const std::string wrong = addRowPiece(head.mutable_tables(), std::move(piece));
        if (!wrong.empty())
            qWarning("%s", wrong.c_str());
        return wrong.empty();
    });
    return head;
}

proto::TableState piece(const std::string &table, std::vector<uint64_t> ids, int width)
{
    proto::TableState rows;
    rows.set_name(table);
    rows.mutable_ids()->Assign(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size() * size_t(width); ++i) {
        rows.add_values(1.0f);
        rows.add_slots(2.0f);
    }
    return rows;
}

} // namespace

class TestShardPieces : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void cutAtAnySizeAndJoinedItIsTheSameBytes_data()
    {
        QTest::addColumn<int>("rowsPerTable");
        QTest::addColumn<qint64>("maxMessageBytes");
        QTest::newRow("a row a piece") << 50 << qint64(8);
        QTest::newRow("a few rows a piece") << 1000 << qint64(4096);
        QTest::newRow("uneven last piece") << 999 << qint64(1000);
        QTest::newRow("all in one piece a table") << 100 << qint64(64 << 20);
    }
    void cutAtAnySizeAndJoinedItIsTheSameBytes()
    {
        QFETCH(int, rowsPerTable);
        QFETCH(qint64, maxMessageBytes);
        const proto::ShardState whole = shardOf(rowsPerTable);
        proto::ShardState head = whole;
        TableStates rows;
        takeTableRows(head.mutable_tables(), &rows);
        // The first message keeps the variables and each table's name and
        // slot names, and no row.
        QCOMPARE(head.variables_size(), 1);
        QCOMPARE(head.tables_size(), 3);
        for (const auto &table : head.tables()) {
            QCOMPARE(table.ids_size(), 0);
            QCOMPARE(table.slot_names_size(), 1);
        }
        int64_t pieces = 0;
        int64_t largest = 0;
        const proto::ShardState joined = cutAndJoin(whole, maxMessageBytes, &pieces, &largest);
        QCOMPARE(pieces, rowPieceCount(rows, pieceBytesWithin(maxMessageBytes)));
        QVERIFY(joined.SerializeAsString() == whole.SerializeAsString());
        // Each piece is within its share of the limit, but for a piece of
        // one row (of 3 values and 3 slot values: 47 bytes with its name and
        // the fields' tags and lengths),
        // which goes whatever the limit.
        QVERIFY2(largest <= std::max<int64_t>(maxMessageBytes / kShardPieceShare, 47),
                 qPrintable(QStringLiteral("a piece of %1 bytes").arg(largest)));
    }

    void aShardPastItsShareOfTheLimitNeedsPieces()
    {
        const proto::ShardState shard = shardOf(1000);
        const auto bytes = int64_t(shard.ByteSizeLong());
        QVERIFY(shardNeedsPieces(shard, bytes));
        QVERIFY(!shardNeedsPieces(shard, bytes * kShardPieceShare));
    }

    void piecesCutWrongAreRefusedWithWhatIsWrong_data()
    {
        QTest::addColumn<QString>("table");
        QTest::addColumn<QList<quint64>>("ids");
        QTest::addColumn<int>("values");
        QTest::addColumn<QString>("said");
        QTest::newRow("a table the first message did not name")
            << QStringLiteral("other") << QList<quint64>{500} << 1 << QStringLiteral("did not name");
        QTest::newRow("no row") << QStringLiteral("weights") << QList<quint64>{} << 0
                                << QStringLiteral("send whole rows, at least one");
        QTest::newRow("values not whole rows")
            << QStringLiteral("factors") << QList<quint64>{500, 501} << 5 << QStringLiteral("send whole rows");
        QTest::newRow("rows of another width")
            << QStringLiteral("factors") << QList<quint64>{500} << 2 << QStringLiteral("unlike the rows before it");
        QTest::newRow("ids not after the rows before")
            << QStringLiteral("weights") << QList<quint64>{3} << 1 << QStringLiteral("send the pieces in id order");
    }
    void piecesCutWrongAreRefusedWithWhatIsWrong()
    {
        QFETCH(QString, table);
        QFETCH(QList<quint64>, ids);
        QFETCH(int, values);
        QFETCH(QString, said);
        proto::ShardState shard = shardOf(10);
        const std::string before = shard.SerializeAsString();
        proto::TableState wrong;
        wrong.set_name(table.toStdString());
        for (const quint64 id : ids)
            wrong.add_ids(id);
        for (int i = 0; i < values; ++i)
            wrong.add_values(1.0f);
        for (int i = 0; i < values; ++i)
            wrong.add_slots(1.0f);
        const std::string refused = addRowPiece(shard.mutable_tables(), std::move(wrong));
        QVERIFY2(QString::fromStdString(refused).contains(said), refused.c_str());
        // Nothing of it was added.
        QVERIFY(shard.SerializeAsString() == before);
    }

    void piecesJoinIntoATableTheFirstMessageLeftEmpty()
    {
        proto::ShardState shard = shardOf(0);
        QVERIFY(addRowPiece(shard.mutable_tables(), piece("empty", {1, 2}, 4)).empty());
        QVERIFY(addRowPiece(shard.mutable_tables(), piece("empty", {9}, 4)).empty());
        const proto::TableState &table = shard.tables(1);
        QCOMPARE(table.ids_size(), 3);
        QCOMPARE(table.values_size(), 12);
        QCOMPARE(table.slots_size(), 12);
    }
};

QTEST_GUILESS_MAIN(TestShardPieces)
#include "tst_shard_pieces.moc"
