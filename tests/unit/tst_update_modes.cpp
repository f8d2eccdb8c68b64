// The table of update modes: names, the written form of a mode with its
// numbers (the comparison's contenders), and the JSON form cluster.json and
// the step log's mode changes carry.
#include "base/error.h"
#include "config/update_modes.h"
#include "support/input_error_checks.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <set>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

class TestUpdateModes : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyModeInTheTableParsesByItsNameAndBack()
    {
        QVERIFY(updateModes().size() >= 3);
        for (const UpdateModeInfo &info : updateModes()) {
            QCOMPARE(parseUpdateMode(info.name), info.mode);
            QCOMPARE(updateModeName(info.mode), std::string(info.name));
            QVERIFY(std::string(info.meaning).size() > 10);
        }
        QCOMPARE(parseUpdateMode("SSP"), proto::SSP);
        QCOMPARE(updateModeName(proto::UPDATE_MODE_UNSPECIFIED), std::string("unspecified"));
        QCOMPARE(findUpdateMode(proto::UPDATE_MODE_UNSPECIFIED), nullptr);
    }

    // The window draws a mode in its colour and labels its button with the
    // label: two modes sharing either could not be told apart.
    void everyModeHasItsOwnLabelAndColour()
    {
        std::set<std::string> labels;
        std::set<unsigned> colours;
        for (const UpdateModeInfo &info : updateModes()) {
            QCOMPARE(findUpdateMode(info.mode), &info);
            QVERIFY2(labels.insert(info.label).second, info.label);
            QVERIFY2(colours.insert(info.rgb).second, info.name);
            QVERIFY(info.rgb <= 0xffffff);
        }
    }

    // What the knobs promise is what a spec carries: a mode takes a number
    // after ':' only when it reads one, and the staleness rule only when it
    // reads that; the description names exactly the numbers it reads.
    void theKnobsDecideWhatASpecAndADescriptionCarry()
    {
        for (const UpdateModeInfo &info : updateModes()) {
            const std::string name = info.name;
            const bool takesNumber = info.knobs.staleness || info.knobs.replicas;
            QCOMPARE(inputErrorOf([&] { parseModeSpec(name + ":2"); }).isEmpty(), takesNumber);
            QCOMPARE(inputErrorOf([&] { parseModeSpec(name + kStalenessRuleSuffix); }).isEmpty(),
                     info.knobs.stalenessRule);
            proto::ModeConfig mode;
            mode.set_mode(info.mode);
            mode.set_staleness(7);
            mode.set_replicas_to_aggregate(2);
            mode.set_learning_rate_by_staleness(true);
            const std::string described = describeMode(mode);
            QCOMPARE(described.find("staleness=7") != std::string::npos, info.knobs.staleness);
            QCOMPARE(described.find("replicas_to_aggregate=2") != std::string::npos, info.knobs.replicas);
            QCOMPARE(described.find("learning rate / staleness") != std::string::npos, info.knobs.stalenessRule);
        }
    }

    void specsReadAsTheirModesAndWriteBackTheSame_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<int>("mode");
        QTest::addColumn<int>("staleness");
        QTest::addColumn<int>("replicas");
        QTest::addColumn<int>("total");
        QTest::newRow("async") << u"async"_s << int(proto::ASYNC) << 0 << 0 << 0;
        QTest::newRow("sync over every live worker") << u"sync"_s << int(proto::SYNC) << 0 << 0 << 0;
        QTest::newRow("sync of 3") << u"sync:3"_s << int(proto::SYNC) << 0 << 3 << 0;
        QTest::newRow("sync with a backup worker") << u"sync:3/4"_s << int(proto::SYNC) << 0 << 3 << 4;
        QTest::newRow("ssp lock-step") << u"ssp:0"_s << int(proto::SSP) << 0 << 0 << 0;
        QTest::newRow("ssp") << u"ssp:30"_s << int(proto::SSP) << 30 << 0 << 0;
        QTest::newRow("async, learning rate / staleness")
            << u"async+lr/staleness"_s << int(proto::ASYNC) << 0 << 0 << 0;
        QTest::newRow("ssp, learning rate / staleness") << u"ssp:5+lr/staleness"_s << int(proto::SSP) << 5 << 0 << 0;
    }

    void specsReadAsTheirModesAndWriteBackTheSame()
    {
        QFETCH(QString, spec);
        QFETCH(int, mode);
        QFETCH(int, staleness);
        QFETCH(int, replicas);
        QFETCH(int, total);
        const proto::ModeConfig parsed = parseModeSpec(spec.toStdString());
        QCOMPARE(int(parsed.mode()), mode);
        QCOMPARE(parsed.staleness(), staleness);
        QCOMPARE(parsed.replicas_to_aggregate(), replicas);
        QCOMPARE(parsed.total_num_replicas(), total);
        QCOMPARE(parsed.learning_rate_by_staleness(), spec.endsWith(u"+lr/staleness"_s));
        QCOMPARE(QString::fromStdString(modeSpec(parsed)), spec);
    }

    void sspWithoutABoundTakesTheDefault() { QCOMPARE(parseModeSpec("ssp").staleness(), kDefaultStaleness); }

    void badSpecsSayWhatToWrite_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("unknown") << u"semi"_s << u"'semi' is not one"_s;
        QTest::newRow("async with a number") << u"async:2"_s << u"takes no numbers"_s;
        QTest::newRow("negative bound") << u"ssp:-1"_s << u"staleness bound of 0 or more"_s;
        QTest::newRow("bound not a number") << u"ssp:ten"_s << u"staleness bound"_s;
        QTest::newRow("empty bound") << u"ssp:"_s << u"staleness bound"_s;
        QTest::newRow("zero replicas") << u"sync:0"_s << u"1 or more"_s;
        QTest::newRow("total below replicas") << u"sync:4/3"_s << u"no smaller than"_s;
        QTest::newRow("total missing") << u"sync:4/"_s << u"no smaller than"_s;
        QTest::newRow("overflow") << u"ssp:99999999999999999999"_s << u"staleness bound"_s;
        QTest::newRow("sync divides nothing")
            << u"sync:3/4+lr/staleness"_s << u"divides no learning rate: its gradients are all fresh"_s;
        QTest::newRow("the rule alone") << u"+lr/staleness"_s << u"is not one"_s;
    }

    void badSpecsSayWhatToWrite()
    {
        QFETCH(QString, spec);
        QFETCH(QString, mentions);
        const QString error = inputErrorOf([&spec] { parseModeSpec(spec.toStdString()); });
        // Every refusal shows the forms that work.
        verifyMentions(error, {mentions, u"sync[:REPLICAS[/TOTAL]]"_s, u"ssp:STALENESS"_s});
    }

    void aListKeepsItsOrderAndRefusesRepeatsAndEmptiness()
    {
        const std::vector<proto::ModeConfig> modes = parseModeSpecList("ssp:3,async,,sync:2/3");
        QCOMPARE(modes.size(), size_t(3));
        QCOMPARE(modes[0].mode(), proto::SSP);
        QCOMPARE(modes[1].mode(), proto::ASYNC);
        QCOMPARE(modes[2].total_num_replicas(), 3);
        verifyMentions(inputErrorOf([] { parseModeSpecList("ssp:3,async,ssp:3"); }), {u"ssp:3 twice"_s});
        verifyMentions(inputErrorOf([] { parseModeSpecList(","); }), {u"no update modes"_s});
        verifyMentions(inputErrorOf([] { parseModeSpecList("async,bogus"); }), {u"'bogus'"_s});
        // The rule makes another contender of the same mode.
        QCOMPARE(parseModeSpecList("async,async+lr/staleness").size(), size_t(2));
    }

    void theRuleIsSaidInWords()
    {
        QCOMPARE(describeMode(parseModeSpec("async+lr/staleness")), std::string("async, learning rate / staleness"));
        QCOMPARE(describeMode(parseModeSpec("ssp:3+lr/staleness")),
                 std::string("ssp (staleness=3), learning rate / staleness"));
        QCOMPARE(describeMode(parseModeSpec("async")), std::string("async"));
    }

    void theJsonFormReadsBackWhatTheRunDirectoryHolds()
    {
        const QJsonObject object = QJsonDocument::fromJson(
                                       R"({"mode": "sync", "replicas_to_aggregate": 3, "total_num_replicas": 4,
                                           "staleness": 10})")
                                       .object();
        const proto::ModeConfig mode = modeFromJson(object);
        QCOMPARE(mode.mode(), proto::SYNC);
        QCOMPARE(mode.replicas_to_aggregate(), 3);
        QCOMPARE(mode.total_num_replicas(), 4);
        QCOMPARE(mode.staleness(), 10);
        QCOMPARE(modeFromJson(QJsonObject{{u"mode"_s, u"semi"_s}}).mode(), proto::UPDATE_MODE_UNSPECIFIED);
        QCOMPARE(modeFromJson(QJsonObject{}).mode(), proto::UPDATE_MODE_UNSPECIFIED);
        QVERIFY(!mode.learning_rate_by_staleness());
        // As the step log writes it, as cluster.json does, as a cluster file may.
        for (const QJsonValue &on : {QJsonValue(true), QJsonValue(1), QJsonValue(u"1"_s), QJsonValue(u"true"_s)})
            QVERIFY(modeFromJson(QJsonObject{{u"mode"_s, u"async"_s}, {u"learning_rate_by_staleness"_s, on}})
                        .learning_rate_by_staleness());
        for (const QJsonValue &off : {QJsonValue(false), QJsonValue(0), QJsonValue(u"0"_s)})
            QVERIFY(!modeFromJson(QJsonObject{{u"mode"_s, u"async"_s}, {u"learning_rate_by_staleness"_s, off}})
                         .learning_rate_by_staleness());
    }
};

QTEST_MAIN(TestUpdateModes)
#include "tst_update_modes.moc"
