// Where variables live: the partitioning rule (TensorFlow's
// min_max_variable_partitioner), the round-robin placement of the pieces,
// the checks on a signature a hostile client filled, and the split and join
// the chief does for initialisation and checkpoints.
#include "base/error.h"
#include "engine/parameter_shard.h"
#include "engine/variable_placement.h"

#include <QtTest>

using namespace parasync;

namespace {

proto::ModelSignature signatureOf(std::initializer_list<std::pair<const char *, std::vector<int64_t>>> variables)
{
    proto::ModelSignature signature;
    signature.set_model("softmax");
    for (const auto &[name, shape] : variables) {
        auto *spec = signature.add_variables();
        spec->set_name(name);
        spec->mutable_shape()->Assign(shape.begin(), shape.end());
    }
    return signature;
}

std::vector<int64_t> sliceRows(const proto::ModelSignature &signature, int variable)
{
    const auto &rows = signature.variables(variable).slice_rows();
    return {rows.begin(), rows.end()};
}

QString refusal(const proto::ModelSignature &signature, int numPs)
{
    try {
        VariablePlacement::fromSignature(signature, numPs);
    } catch (const InputError &e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

// Whole variable `name` of `size` values 0, 1, 2, ... with an Adam-like slot.
proto::VariableState wholeVariable(const std::string &name, const std::vector<int64_t> &shape, float base)
{
    int64_t size = 1;
    for (const int64_t d : shape)
        size *= d;
    Eigen::VectorXf values(size);
    for (int64_t i = 0; i < size; ++i)
        values[i] = base + float(i);
    proto::VariableState state;
    state.set_name(name);
    state.set_update_count(7);
    toTensor(values, shape, state.mutable_value());
    toTensor(Eigen::VectorXf(values * 0.5f), shape, &(*state.mutable_slots())["m"]);
    return state;
}

} // namespace

class TestVariablePlacement : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void largeVariablesAreSplitOverThePsTasks_data()
    {
        QTest::addColumn<int>("numPs");
        QTest::addColumn<qint64>("minSliceBytes");
        QTest::addColumn<std::vector<int64_t>>("expected");
        // W [100000, 10] is 3.8 MiB: one slice per ps task at the default.
        QTest::newRow("2 ps") << 2 << qint64(262144) << std::vector<int64_t>{50000, 50000};
        QTest::newRow("3 ps: the first rows % 3 slices one row longer")
            << 3 << qint64(262144) << std::vector<int64_t>{33334, 33333, 33333};
        QTest::newRow("4 ps") << 4 << qint64(262144) << std::vector<int64_t>{25000, 25000, 25000, 25000};
        // 4 MB / 1.5 MB: two slices of at least 1.5 MB, not four smaller ones.
        QTest::newRow("slices at least min_slice_bytes") << 4 << qint64(1500000) << std::vector<int64_t>{50000, 50000};
        QTest::newRow("one ps: whole") << 1 << qint64(262144) << std::vector<int64_t>{};
        QTest::newRow("0 keeps it whole") << 4 << qint64(0) << std::vector<int64_t>{};
        QTest::newRow("smaller than two slices: whole") << 4 << qint64(3000000) << std::vector<int64_t>{};
    }
    void largeVariablesAreSplitOverThePsTasks()
    {
        QFETCH(int, numPs);
        QFETCH(qint64, minSliceBytes);
        QFETCH(std::vector<int64_t>, expected);
        proto::ModelSignature signature = signatureOf({{"softmax/W", {100000, 10}}, {"softmax/b", {10}}});
        VariablePlacement::partition(&signature, numPs, minSliceBytes);
        QCOMPARE(sliceRows(signature, 0), expected);
        QVERIFY(sliceRows(signature, 1).empty()); // 40 bytes
    }

    void smallVariablesStayWholeAndScalarsAreNeverSplit()
    {
        // The 784 x 10 softmax (31 KiB) is whole at the default threshold,
        // split with a small one; a variable of 3 rows has at most 3 slices.
        proto::ModelSignature signature = signatureOf({{"W", {784, 10}}, {"b", {10}}, {"s", {}}, {"r", {3, 1000}}});
        VariablePlacement::partition(&signature, 4, VariablePlacement::kDefaultMinSliceBytes);
        for (int i = 0; i < 4; ++i)
            QVERIFY(sliceRows(signature, i).empty());
        VariablePlacement::partition(&signature, 4, 1024);
        QCOMPARE(sliceRows(signature, 0), (std::vector<int64_t>{196, 196, 196, 196}));
        QCOMPARE(sliceRows(signature, 1), (std::vector<int64_t>{})); // 40 bytes
        QCOMPARE(sliceRows(signature, 2), (std::vector<int64_t>{})); // a scalar
        QCOMPARE(sliceRows(signature, 3), (std::vector<int64_t>{1, 1, 1}));
    }

    void piecesArePlacedRoundRobinInDeclarationOrder()
    {
        proto::ModelSignature signature = signatureOf({{"W", {784, 10}}, {"b", {10}}});
        VariablePlacement::partition(&signature, 2, 1024);
        const VariablePlacement placement = VariablePlacement::fromSignature(signature, 2);
        QVERIFY(placement.partitioned());
        // W/part_0 -> ps:0, W/part_1 -> ps:1, b -> ps:0.
        QCOMPARE(placement.on(0).size(), size_t(2));
        QCOMPARE(placement.on(0)[0].name, std::string("W/part_0"));
        QCOMPARE(placement.on(0)[1].name, std::string("b"));
        QCOMPARE(placement.on(1).size(), size_t(1));
        const VariableSlice &second = placement.on(1)[0];
        QCOMPARE(second.name, std::string("W/part_1"));
        QCOMPARE(second.shape, (std::vector<int64_t>{392, 10}));
        QCOMPARE(second.firstRow, int64_t(392));
        QCOMPARE(second.offset, int64_t(3920));
        QCOMPARE(second.size, int64_t(3920));
        QCOMPARE(placement.describe(0), std::string("W rows 0-391 of 784 (15.3 KiB), b (40 bytes)"));
        QCOMPARE(placement.describe(1), std::string("W rows 392-783 of 784 (15.3 KiB)"));

        // Unpartitioned, the old rule: variable i on ps i % num_ps.
        const VariablePlacement whole = VariablePlacement::fromSignature(signatureOf({{"w", {1}}, {"b", {1}}}), 3);
        QVERIFY(!whole.partitioned());
        QCOMPARE(whole.on(0)[0].name, std::string("w"));
        QCOMPARE(whole.on(1)[0].name, std::string("b"));
        QVERIFY(whole.on(2).empty());
        QCOMPARE(whole.describe(2), std::string());
    }

    void hostileSlicesAreRefusedSayingWhatIsWrong_data()
    {
        QTest::addColumn<std::vector<int64_t>>("shape");
        QTest::addColumn<std::vector<int64_t>>("rows");
        QTest::addColumn<QString>("expected");
        QTest::newRow("rows short of dimension 0") << std::vector<int64_t>{10, 2} << std::vector<int64_t>{4, 5}
                                                   << QStringLiteral("9 rows in all, but it has 10");
        QTest::newRow("rows beyond dimension 0")
            << std::vector<int64_t>{10, 2} << std::vector<int64_t>{8, 8} << QStringLiteral("rows leave 2");
        QTest::newRow("an empty slice") << std::vector<int64_t>{10, 2} << std::vector<int64_t>{10, 0}
                                        << QStringLiteral("at least one row");
        QTest::newRow("a negative slice")
            << std::vector<int64_t>{10, 2} << std::vector<int64_t>{12, -2} << QStringLiteral("rows leave 10");
        QTest::newRow("one slice") << std::vector<int64_t>{10, 2} << std::vector<int64_t>{10}
                                   << QStringLiteral("single slice");
        QTest::newRow("a scalar with slices")
            << std::vector<int64_t>{} << std::vector<int64_t>{1, 1} << QStringLiteral("is a scalar");
        QTest::newRow("a negative dimension")
            << std::vector<int64_t>{10, -2} << std::vector<int64_t>{} << QStringLiteral("negative dimension -2");
        QTest::newRow("2^40 x 2^40 values") << std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}
                                            << std::vector<int64_t>{} << QStringLiteral("more than 2^31 values");
        QTest::newRow("more slices than allowed")
            << std::vector<int64_t>{5000} << std::vector<int64_t>(5000, 1) << QStringLiteral("more than 4096");
    }
    void hostileSlicesAreRefusedSayingWhatIsWrong()
    {
        QFETCH(std::vector<int64_t>, shape);
        QFETCH(std::vector<int64_t>, rows);
        QFETCH(QString, expected);
        proto::ModelSignature signature = signatureOf({{"W", shape}});
        signature.mutable_variables(0)->mutable_slice_rows()->Assign(rows.begin(), rows.end());
        const QString message = refusal(signature, 2);
        QVERIFY2(message.contains(expected), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("'W'")), qPrintable(message));
    }

    void splitThenJoinGivesBackTheWholeVariablesWithTheirSlots()
    {
        proto::ModelSignature signature = signatureOf({{"W", {7, 3}}, {"b", {3}}, {"c", {5, 2}}});
        VariablePlacement::partition(&signature, 3, 8); // W: 84 bytes -> 3 slices; c: 40 -> 3
        const VariablePlacement placement = VariablePlacement::fromSignature(signature, 3);
        QCOMPARE(sliceRows(signature, 0), (std::vector<int64_t>{3, 2, 2}));
        const std::vector<proto::VariableState> whole{wholeVariable("W", {7, 3}, 0), wholeVariable("b", {3}, 100),
                                                      wholeVariable("c", {5, 2}, 200)};
        const std::vector<proto::ShardState> shards = placement.split(whole);
        QCOMPARE(shards.size(), size_t(3));
        // ps:1 holds W/part_1: rows 3-4, values 9..14, and its slot's half.
        const auto &piece = shards[1].variables(0);
        QCOMPARE(piece.name(), std::string("W/part_1"));
        QCOMPARE(std::vector<int64_t>(piece.value().shape().begin(), piece.value().shape().end()),
                 (std::vector<int64_t>{2, 3}));
        QCOMPARE(piece.value().values(0), 9.0f);
        QCOMPARE(piece.value().values(5), 14.0f);
        QCOMPARE(piece.slots().at("m").values(0), 4.5f);
        QCOMPARE(piece.update_count(), int64_t(7));

        const std::vector<proto::VariableState> joined = placement.join(shards);
        QCOMPARE(joined.size(), whole.size());
        for (size_t i = 0; i < whole.size(); ++i)
            QVERIFY2(joined[i].SerializeAsString() == whole[i].SerializeAsString(),
                     qPrintable(QString::fromStdString(joined[i].DebugString())));

        // Into another number of ps tasks: the same variables come back.
        proto::ModelSignature two = signature;
        VariablePlacement::partition(&two, 2, 8);
        const VariablePlacement other = VariablePlacement::fromSignature(two, 2);
        const std::vector<proto::VariableState> again = other.join(other.split(joined));
        for (size_t i = 0; i < whole.size(); ++i)
            QVERIFY(again[i].SerializeAsString() == whole[i].SerializeAsString());
    }

    void joinRefusesShardsThatDoNotHoldThePlacementsPieces()
    {
        proto::ModelSignature signature = signatureOf({{"W", {4, 2}}, {"b", {2}}});
        VariablePlacement::partition(&signature, 2, 8);
        const VariablePlacement placement = VariablePlacement::fromSignature(signature, 2);
        std::vector<proto::ShardState> shards
            = placement.split({wholeVariable("W", {4, 2}, 0), wholeVariable("b", {2}, 0)});
        shards[1].mutable_variables(0)->set_name("W");
        try {
            placement.join(shards);
            QFAIL("a shard holding the wrong piece was joined");
        } catch (const InputError &e) {
            QVERIFY2(QString::fromLatin1(e.what()).contains(QStringLiteral("ps:1 holds 'W'")), e.what());
        }
        // A slot one piece lacks is left out rather than restored in part.
        shards = placement.split({wholeVariable("W", {4, 2}, 0), wholeVariable("b", {2}, 0)});
        shards[1].mutable_variables(0)->mutable_slots()->clear();
        const auto joined = placement.join(shards);
        QVERIFY(!joined[0].slots().contains("m"));
        QVERIFY(joined[1].slots().contains("m"));
    }
};

QTEST_APPLESS_MAIN(TestVariablePlacement)
#include "tst_variable_placement.moc"
