// `parasync`'s command line as the app reads it, parsed with its real
// declarations: which flag reaches the plan, the connect request or the
// headless run, and what --headless does with a cluster that trains until
// stopped.
#include "ui/app_command_line.h"

#include "base/error.h"
#include "config/plan_from_flags.h"
#include "support/input_error_checks.h"

#include <QCommandLineParser>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;
using namespace Qt::StringLiterals;

namespace {

// Parses `arguments` as `parasync ARGUMENTS`; false (and a test failure
// message) when the parser refuses them.
bool parse(QCommandLineParser &parser, const QStringList &arguments)
{
    declareAppCommandLine(parser);
    const bool ok = parser.parse(QStringList{QStringLiteral("parasync")} + arguments);
    if (!ok)
        qWarning("%s", qPrintable(parser.errorText()));
    return ok;
}

} // namespace

class TestAppCommandLine : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { qunsetenv("PARASYNC_DEMO_PORTS"); }

    // A wrong flag is bad input, 2 as in parasync-node, and a typo gets the
    // flag it nearly is; a right one parses on.
    void aWrongFlagGivesTwoAndATypoItsNearestFlag()
    {
        QCommandLineParser parser;
        const AppFlags declared = declareAppCommandLine(parser);
        QVERIFY(declared.names.contains(QStringLiteral("learning_rate")));
        const std::optional<int> refused
            = parseAppCommandLine(parser, declared, {u"parasync"_s, u"--lerning_rate=0.1"_s});
        QVERIFY(refused);
        QCOMPARE(*refused, 2);
        QVERIFY2(commandLineError(parser, declared).endsWith(u"Did you mean --learning_rate?"_s),
                 qPrintable(commandLineError(parser, declared)));
        // Qt's own flags too, as parasync-node answers them.
        QCommandLineParser qtsOwn;
        declareAppCommandLine(qtsOwn);
        QCOMPARE(parseAppCommandLine(qtsOwn, declared, {u"parasync"_s, u"--versoin"_s}), std::optional<int>(2));
        QCOMPARE(commandLineError(qtsOwn, declared), u"Unknown option 'versoin'. Did you mean --version?"_s);
        QCommandLineParser again;
        declareAppCommandLine(again);
        QVERIFY(!parseAppCommandLine(again, declared, {u"parasync"_s, u"--learning_rate=0.1"_s}));
        QCOMPARE(again.value(u"learning_rate"_s), u"0.1"_s);
    }

    // TensorFlow's spellings of a boolean: --name, --noname, --name=true|false|1|0.
    void aSwitchTakesEveryBooleanForm()
    {
        const auto headless = [](const QString &argument) -> std::optional<bool> {
            QCommandLineParser parser;
            const AppFlags declared = declareAppCommandLine(parser);
            if (parseAppCommandLine(parser, declared, {u"parasync"_s, u"--demo"_s, argument}))
                return std::nullopt;
            return parser.isSet(u"headless"_s);
        };
        QCOMPARE(headless(u"--headless"_s), std::optional<bool>(true));
        QCOMPARE(headless(u"--headless=true"_s), std::optional<bool>(true));
        QCOMPARE(headless(u"--headless=1"_s), std::optional<bool>(true));
        QCOMPARE(headless(u"--noheadless"_s), std::optional<bool>(false));
        QCOMPARE(headless(u"--headless=false"_s), std::optional<bool>(false));
        QCOMPARE(headless(u"--headless=0"_s), std::optional<bool>(false));

        QCommandLineParser parser;
        const AppFlags declared = declareAppCommandLine(parser);
        QCOMPARE(parseAppCommandLine(parser, declared, {u"parasync"_s, u"--headless=maybe"_s}), std::optional<int>(2));
        // --no before a flag that takes a value is no flag at all.
        QCommandLineParser other;
        QCOMPARE(parseAppCommandLine(other, declareAppCommandLine(other), {u"parasync"_s, u"--nologdir"_s}),
                 std::optional<int>(2));
    }

    void everyTrainingFlagHandedToTheTasksIsDeclared()
    {
        QCommandLineParser parser;
        declareAppCommandLine(parser);
        const QString help = parser.helpText();
        for (const std::string &name : appTrainingFlags())
            QVERIFY2(
                help.contains(QStringLiteral("--%1 <").arg(QString::fromStdString(name))),
                qPrintable(QStringLiteral("--%1 is handed on but not declared").arg(QString::fromStdString(name))));
    }

    // A workload from the command line, with the model and data flags a
    // user trains their own problem with.
    void aWorkloadWithSeedAndDataFlagsBecomesThePlan()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--workload=staleness"), QStringLiteral("--seed=3"),
                               QStringLiteral("--eval_fraction=0.1"), QStringLiteral("--dataset=blobs:5:3")}));
        QVERIFY(wantsCluster(parser));
        const ClusterPlan plan = planFromArguments(parser);
        QCOMPARE(plan.cluster.numWorkers(), 16);
        QCOMPARE(plan.training.seed, uint64_t(3));
        QCOMPARE(plan.training.evalFraction, 0.1);
        QCOMPARE(plan.training.dataset, std::string("blobs:5:3"));
        QCOMPARE(plan.training.model, std::string("softmax"));
    }

    void demoFlagsBecomeThePlan()
    {
        QCommandLineParser parser;
        QVERIFY(
            parse(parser, {QStringLiteral("--demo"), QStringLiteral("--mode=sync"), QStringLiteral("--last_step=700"),
                           QStringLiteral("--ps_hosts=127.0.0.1:6000"), QStringLiteral("--straggler_ms=0")}));
        QVERIFY(wantsCluster(parser));
        const ClusterPlan plan = planFromArguments(parser);
        QCOMPARE(plan.training.mode.mode(), proto::SYNC);
        QCOMPARE(plan.training.lastStep, int64_t(700));
        QCOMPARE(plan.cluster.ps.front().port, uint16_t(6000));
        QCOMPARE(plan.cluster.workers, ClusterPlan::demo().cluster.workers);
        QCOMPARE(plan.paceOf(1).stragglerMs, 0);
        QCOMPARE(plan.paceOf(1).computeMs, 40); // the demo's pace, where no flag says otherwise
    }

    void aWrongValueIsRefusedByItsFlag()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--demo"), QStringLiteral("--staleness=many")}));
        verifyMentions(inputErrorOf([&parser] { planFromArguments(parser); }), {QStringLiteral("--staleness")});
    }

    void noClusterFlagNoCluster()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--open=/runs/a")}));
        QVERIFY(!wantsCluster(parser));
    }

    void connectFlagsBecomeTheConnectRequest()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--connect=10.0.0.5:2222"), QStringLiteral("--run_dir=/runs/a"),
                               QStringLiteral("--cluster_token_file=/secrets/token"), QStringLiteral("--tls_ca=ca.pem"),
                               QStringLiteral("--tls_cert=app.pem"), QStringLiteral("--tls_key=app.key")}));
        const ConnectRequest request = connectRequestFromArguments(parser);
        QCOMPARE(request.address, QStringLiteral("10.0.0.5:2222"));
        QCOMPARE(request.runDirectory, QStringLiteral("/runs/a"));
        QCOMPARE(request.tokenFile, QStringLiteral("/secrets/token"));
        QVERIFY(request.token.isEmpty()); // never from a command line
        QCOMPARE(request.connection.tlsCa, std::string("ca.pem"));
        QCOMPARE(request.connection.tlsCert, std::string("app.pem"));
        QCOMPARE(request.connection.tlsKey, std::string("app.key"));
    }

    void aHeadlessDemoToursTheThreeModesToEnd()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--headless"), QStringLiteral("--demo"), QStringLiteral("--staleness=4"),
                               QStringLiteral("--export=/tmp/charts")}));
        const ClusterPlan plan = planFromArguments(parser);
        const HeadlessOptions options = headlessOptionsFromArguments(parser, plan);
        QCOMPARE(options.source, HeadlessOptions::Source::Launch);
        QCOMPARE(options.exportDirectory, QStringLiteral("/tmp/charts"));
        QCOMPARE(options.plan.cluster, plan.cluster);
        // The plan's mode first, then the others: 20 s each, a minute in all.
        QCOMPARE(options.tour.size(), size_t(3));
        const proto::UpdateMode modes[] = {proto::ASYNC, proto::SYNC, proto::SSP};
        for (size_t i = 0; i < 3; ++i) {
            QCOMPARE(options.tour[i].mode.mode(), modes[i]);
            QCOMPARE(options.tour[i].mode.staleness(), 4);
            QCOMPARE(options.tour[i].seconds, 20);
        }
    }

    void aHeadlessDemoInOneModeRunsAMinuteInIt()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--headless"), QStringLiteral("--demo"), QStringLiteral("--mode=ssp")}));
        const HeadlessOptions options = headlessOptionsFromArguments(parser, planFromArguments(parser));
        QCOMPARE(options.tour.size(), size_t(1));
        QCOMPARE(options.tour.front().mode.mode(), proto::SSP);
        QCOMPARE(options.tour.front().seconds, 60);
    }

    void aHeadlessRunWithALastStepRunsToIt()
    {
        QCommandLineParser parser;
        QVERIFY(
            parse(parser, {QStringLiteral("--headless"), QStringLiteral("--demo"), QStringLiteral("--last_step=300"),
                           QStringLiteral("--timeout=30"), QStringLiteral("--skip_preflight")}));
        const HeadlessOptions options = headlessOptionsFromArguments(parser, planFromArguments(parser));
        QVERIFY(options.tour.empty());
        QCOMPARE(options.plan.training.lastStep, int64_t(300));
        QCOMPARE(options.timeoutSeconds, 30);
        QVERIFY(options.skipPreflight);
        QVERIFY(!options.preflightOnly);
    }

    void aHeadlessReplayWinsOverWatchingAndWatchingOverLaunching()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--headless"), QStringLiteral("--open=/runs/a"),
                               QStringLiteral("--connect=10.0.0.5:2222"), QStringLiteral("--demo")}));
        HeadlessOptions options = headlessOptionsFromArguments(parser, planFromArguments(parser));
        QCOMPARE(options.source, HeadlessOptions::Source::Open);
        QCOMPARE(options.runDirectory, QStringLiteral("/runs/a"));

        QCommandLineParser watching;
        QVERIFY(parse(watching, {QStringLiteral("--headless"), QStringLiteral("--connect=10.0.0.5:2222"),
                                 QStringLiteral("--demo"), QStringLiteral("--preflight")}));
        options = headlessOptionsFromArguments(watching, planFromArguments(watching));
        QCOMPARE(options.source, HeadlessOptions::Source::Connect);
        QCOMPARE(options.connect.address, QStringLiteral("10.0.0.5:2222"));
        QVERIFY(options.preflightOnly);
    }

    void aHeadlessRunWithNothingToRunSaysWhatItNeeds()
    {
        QCommandLineParser parser;
        QVERIFY(parse(parser, {QStringLiteral("--headless"), QStringLiteral("--export=/tmp/charts")}));
        verifyMentions(inputErrorOf([&parser] { headlessOptionsFromArguments(parser, std::nullopt); }),
                       {QStringLiteral("--demo"), QStringLiteral("--cluster_file"), QStringLiteral("--connect"),
                        QStringLiteral("--open")});
    }

    void aTimeoutThatIsNoNumberIsRefusedNotTakenForZero()
    {
        const auto plan = ClusterPlan::demo();
        for (const QString &value : {QStringLiteral("abc"), QStringLiteral("0"), QStringLiteral("-5")}) {
            QCommandLineParser parser;
            QVERIFY(parse(parser, {QStringLiteral("--headless"), QStringLiteral("--demo"),
                                   QStringLiteral("--timeout=") + value}));
            verifyMentions(inputErrorOf([&] { headlessOptionsFromArguments(parser, plan); }),
                           {QStringLiteral("--timeout=") + value, QStringLiteral("whole number")});
        }
        QCommandLineParser parser;
        QVERIFY(
            parse(parser, {QStringLiteral("--headless"), QStringLiteral("--demo"), QStringLiteral("--timeout=90")}));
        QCOMPARE(headlessOptionsFromArguments(parser, plan).timeoutSeconds, 90);
    }
};

QTEST_GUILESS_MAIN(TestAppCommandLine)
#include "tst_app_command_line.moc"
