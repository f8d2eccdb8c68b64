// The lease that keeps a replicated ps pair to one primary (node/lease.h),
// driven through orders of events with a clock the test moves: a voter
// promises one candidate at a time, a restarted voter promises nothing for
// a lease, epochs only rise, a holder stops before any voter may promise
// another, and the witness checks a vote request as a stranger would fill it.
#include "node/lease.h"

#include <QTest>

#include <limits>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

const std::string kPrimary = "127.0.0.1:2222";
const std::string kBackup = "127.0.0.1:2225";

ClusterSpec pairCluster()
{
    ClusterSpec cluster;
    cluster.ps = {HostPort{"127.0.0.1", 2222}};
    cluster.psBackups = {HostPort{"127.0.0.1", 2225}};
    cluster.workers = {HostPort{"127.0.0.1", 2223}, HostPort{"127.0.0.1", 2224}};
    return cluster;
}

proto::VoteRequest request(const std::string &candidate, int64_t epoch, int64_t leaseMs = 1000, int psIndex = 0)
{
    proto::VoteRequest r;
    r.set_ps_index(psIndex);
    r.set_candidate(candidate);
    r.set_epoch(epoch);
    r.set_lease_ms(leaseMs);
    return r;
}

} // namespace

class TestLease : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aVoterPromisesOneCandidateAtATime()
    {
        const LeaseClock::time_point t0{};
        LeaseVote vote("the witness", t0 - 10s, 1000ms);
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, t0).granted);
        // The primary renews under its epoch; the backup is refused while
        // the promise lasts, and told to whom and for how long.
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, t0 + 400ms).granted);
        const auto refused = vote.ask(kBackup, 2, 1000ms, t0 + 900ms);
        QVERIFY(!refused.granted);
        QCOMPARE(refused.holder, kPrimary);
        QCOMPARE(refused.left, 500ms);
        QVERIFY2(refused.reason.find("promised its vote to 127.0.0.1:2222 for another 500 ms") != std::string::npos,
                 refused.reason.c_str());
        // Once it ends, the backup wins under a higher epoch, and the old
        // primary's renewal under its own is refused, naming the new one.
        QVERIFY(vote.ask(kBackup, 2, 1000ms, t0 + 1401ms).granted);
        const auto deposed = vote.ask(kPrimary, 1, 1000ms, t0 + 1500ms);
        QVERIFY(!deposed.granted);
        QCOMPARE(deposed.epoch, int64_t(2));
        QCOMPARE(deposed.holder, kBackup);
    }

    void aNewHolderNeedsAHigherEpoch()
    {
        const LeaseClock::time_point t0{};
        LeaseVote vote("v", t0 - 10s, 1000ms);
        QVERIFY(vote.ask(kPrimary, 3, 1000ms, t0).granted);
        // Its promise over, another candidate under the same epoch would make
        // two holders of one epoch: refused.
        QVERIFY(!vote.ask(kBackup, 3, 1000ms, t0 + 2s).granted);
        QVERIFY(vote.ask(kBackup, 4, 1000ms, t0 + 2s).granted);
        // The old holder may come back only under a higher one still.
        QVERIFY(!vote.ask(kPrimary, 3, 1000ms, t0 + 4s).granted);
        QVERIFY(vote.ask(kPrimary, 5, 1000ms, t0 + 4s).granted);
        QCOMPARE(vote.epoch(), int64_t(5));
    }

    void aRestartedVoterPromisesNothingForALease()
    {
        // It may have promised its vote in its last life until up to a lease
        // after it started again.
        const LeaseClock::time_point started{};
        LeaseVote vote("the witness worker:0", started, 1000ms);
        const auto early = vote.ask(kBackup, 2, 1000ms, started + 999ms);
        QVERIFY(!early.granted);
        QVERIFY2(early.reason.find("started less than a lease ago") != std::string::npos, early.reason.c_str());
        QVERIFY(vote.ask(kBackup, 2, 1000ms, started + 1000ms).granted);
    }

    void aReleasedPromiseFreesTheVoteAtOnce()
    {
        const LeaseClock::time_point t0{};
        LeaseVote vote("v", t0 - 10s, 1000ms);
        QVERIFY(vote.ask(kBackup, 2, 1000ms, t0).granted);
        vote.release(kPrimary); // not its holder: nothing changes
        QVERIFY(!vote.ask(kPrimary, 3, 1000ms, t0 + 10ms).granted);
        vote.release(kBackup);
        QVERIFY(vote.ask(kPrimary, 3, 1000ms, t0 + 20ms).granted);
    }

    void aPrimaryServingAloneKeepsOutABackupWithoutItsUpdates()
    {
        // The primary's backup went: it serves alone, its second turn, and
        // says so. The backup, cut off with the state of the first turn,
        // must not take over while the primary may still come back with
        // what it acknowledged since: refused for kAloneGraceLeases of the
        // primary's leases after its last such ask, and told whom it lacks.
        const LeaseClock::time_point t0{};
        LeaseVote vote("the witness", t0 - 10s, 1000ms);
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, t0, 2).granted);
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, t0 + 500ms, 2).granted);
        const auto kept = vote.ask(kBackup, 2, 1000ms, t0 + 3s, 0, 1);
        QVERIFY(!kept.granted);
        QCOMPARE(kept.servedAloneBy, kPrimary);
        QCOMPARE(kept.left, 10500ms - 3000ms);
        QVERIFY2(kept.reason.find("knows that 127.0.0.1:2222 acknowledged updates without a backup holding them")
                     != std::string::npos,
                 kept.reason.c_str());
        QVERIFY(!vote.ask(kBackup, 2, 1000ms, t0 + 10499ms, 0, 1).granted);
        // Gone that long, the primary took its updates with it: the backup
        // wins, told that it takes over without them; once.
        const auto won = vote.ask(kBackup, 2, 1000ms, t0 + 10500ms, 0, 1);
        QVERIFY(won.granted);
        QCOMPARE(won.servedAloneBy, kPrimary);
        QVERIFY(vote.ask(kBackup, 2, 1000ms, t0 + 10600ms, 0, 1).servedAloneBy.empty());
    }

    void aBackupHoldingTheTurnsStateTakesOverAtOnce()
    {
        // It took the primary's state after the primary began its turn
        // alone: it holds everything acknowledged since, whether or not the
        // primary has told the voters that it no longer serves alone.
        const LeaseClock::time_point t0{};
        LeaseVote vote("the witness", t0 - 10s, 1000ms);
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, t0, 3).granted);
        const auto takeover = vote.ask(kBackup, 2, 1000ms, t0 + 1001ms, 0, 3);
        QVERIFY(takeover.granted);
        QVERIFY(takeover.servedAloneBy.empty());

        // And a primary whose backup holds everything again asks without a
        // turn: a backup of any state may take over once the promise ends.
        LeaseVote again("the witness", t0 - 10s, 1000ms);
        QVERIFY(again.ask(kPrimary, 1, 1000ms, t0, 1).granted);
        QVERIFY(again.ask(kPrimary, 1, 1000ms, t0 + 250ms).granted);
        QVERIFY(again.ask(kBackup, 2, 1000ms, t0 + 1250ms).granted);
    }

    void theTurnsTravelInTheVoteRequest()
    {
        const LeaseClock::time_point t0{};
        LeaseVoter witness(pairCluster(), "the witness worker:0 at 127.0.0.1:2223", {0}, 1000ms, t0 - 10s);
        proto::VoteRequest asked = request(kPrimary, 1);
        asked.set_alone_turn(4);
        proto::VoteResponse response;
        QVERIFY(witness.vote(asked, &response, t0).empty());
        QVERIFY(response.granted());
        proto::VoteRequest takeover = request(kBackup, 2);
        takeover.set_holds_turn(3);
        QVERIFY(witness.vote(takeover, &response, t0 + 2s).empty());
        QVERIFY(!response.granted());
        QCOMPARE(response.served_alone_by(), kPrimary);
        QCOMPARE(response.promised_ms(), int64_t(8000));
        takeover.set_holds_turn(4);
        QVERIFY(witness.vote(takeover, &response, t0 + 2s).empty());
        QVERIFY(response.granted());
        // Turns as a stranger might fill them.
        for (const int64_t turn : {int64_t(-1), std::numeric_limits<int64_t>::min()}) {
            proto::VoteRequest hostile = request(kPrimary, 3);
            hostile.set_alone_turn(turn);
            const std::string problem = witness.vote(hostile, &response, t0 + 3s);
            QVERIFY2(problem.find("turns are counted from 0") != std::string::npos, problem.c_str());
            hostile.set_alone_turn(0);
            hostile.set_holds_turn(turn);
            QVERIFY(!witness.vote(hostile, &response, t0 + 3s).empty());
        }
    }

    void anEpochLearnedElsewhereIsNeverLowered()
    {
        LeaseVote vote("v", LeaseClock::time_point{} - 10s, 1000ms);
        vote.sawEpoch(7);
        vote.sawEpoch(3);
        QCOMPARE(vote.epoch(), int64_t(7));
        QVERIFY(!vote.ask(kPrimary, 6, 1000ms, LeaseClock::time_point{}).granted);
        QVERIFY(vote.ask(kPrimary, 7, 1000ms, LeaseClock::time_point{}).granted);
    }

    void aHolderStopsBeforeAnyVoterMayPromiseAnother()
    {
        // The holder counts from when it asked, less the clocks' drift; the
        // voter from when it answered. Even answered at once, the holder's
        // end comes first by the drift allowance.
        const LeaseClock::time_point asked{};
        LeaseHold hold;
        QVERIFY(!hold.held(asked));
        hold.granted("witness", asked, 1000ms);
        QVERIFY(hold.held(asked + 949ms));
        QVERIFY(!hold.held(asked + 950ms));
        LeaseVote vote("witness", asked - 10s, 1000ms);
        QVERIFY(vote.ask(kPrimary, 1, 1000ms, asked).granted);
        QVERIFY(!vote.ask(kBackup, 2, 1000ms, asked + 950ms).granted);
        // Two voters: held until the later promise ends.
        hold.granted("backup", asked + 500ms, 1000ms);
        QVERIFY(hold.held(asked + 1400ms));
        hold.refused("backup");
        QVERIFY(!hold.held(asked + 1400ms));
    }

    void aVoteRequestIsCheckedAsAStrangerWouldFillIt_data()
    {
        QTest::addColumn<int>("psIndex");
        QTest::addColumn<QString>("candidate");
        QTest::addColumn<qint64>("epoch");
        QTest::addColumn<qint64>("leaseMs");
        QTest::addColumn<QString>("error");
        QTest::newRow("no such pair") << 1 << QString::fromStdString(kPrimary) << qint64(1) << qint64(1000)
                                      << "a vote for ps:1's lease asked of a voter that votes for ps:0's only";
        QTest::newRow("negative pair") << -1 << QString::fromStdString(kPrimary) << qint64(1) << qint64(1000)
                                       << "a vote for ps:-1's lease";
        QTest::newRow("not of the pair") << 0 << "127.0.0.1:9999" << qint64(1) << qint64(1000)
                                         << "whose processes are 127.0.0.1:2222 or 127.0.0.1:2225";
        QTest::newRow("empty candidate") << 0 << "" << qint64(1) << qint64(1000) << "a candidate at ''";
        QTest::newRow("epoch 0") << 0 << QString::fromStdString(kPrimary) << qint64(0) << qint64(1000)
                                 << "epochs begin at 1";
        QTest::newRow("negative epoch") << 0 << QString::fromStdString(kPrimary) << qint64(-5) << qint64(1000)
                                        << "epochs begin at 1";
        QTest::newRow("no lease") << 0 << QString::fromStdString(kPrimary) << qint64(1) << qint64(0)
                                  << "promises 1 to 1000 ms";
        QTest::newRow("longer than its own") << 0 << QString::fromStdString(kPrimary) << qint64(1) << qint64(1001)
                                             << "give every task the same --ps_lease_ms";
        QTest::newRow("huge lease") << 0 << QString::fromStdString(kPrimary) << qint64(1)
                                    << std::numeric_limits<qint64>::max() << "promises 1 to 1000 ms";
    }

    void aVoteRequestIsCheckedAsAStrangerWouldFillIt()
    {
        QFETCH(int, psIndex);
        QFETCH(QString, candidate);
        QFETCH(qint64, epoch);
        QFETCH(qint64, leaseMs);
        QFETCH(QString, error);
        const LeaseClock::time_point t0{};
        LeaseVoter voter(pairCluster(), "ps:0's process at 127.0.0.1:2225", {0}, 1000ms, t0 - 10s);
        proto::VoteResponse response;
        const std::string problem
            = voter.vote(request(candidate.toStdString(), epoch, leaseMs, psIndex), &response, t0);
        QVERIFY2(problem.find(error.toStdString()) != std::string::npos, problem.c_str());
        QVERIFY(!response.granted());
        // Refusing it promised nothing: the primary still wins the vote.
        QVERIFY(voter.vote(request(kPrimary, 1), &response, t0).empty());
        QVERIFY(response.granted());
    }

    void theWitnessVotesForEveryPairApart()
    {
        ClusterSpec cluster = pairCluster();
        cluster.ps.push_back(HostPort{"127.0.0.1", 2226});
        cluster.psBackups.push_back(HostPort{"127.0.0.1", 2227});
        const LeaseClock::time_point t0{};
        LeaseVoter witness(cluster, "the witness worker:0 at 127.0.0.1:2223", {0, 1}, 1000ms, t0 - 10s);
        proto::VoteResponse response;
        QVERIFY(witness.vote(request(kPrimary, 1), &response, t0).empty());
        QVERIFY(response.granted());
        QVERIFY(witness.vote(request("127.0.0.1:2227", 4, 1000, 1), &response, t0).empty());
        QVERIFY(response.granted());
        QCOMPARE(response.epoch(), int64_t(4));
        // ps:0's backup is still refused: its pair's promise is ps:0's own.
        QVERIFY(witness.vote(request(kBackup, 2), &response, t0 + 10ms).empty());
        QVERIFY(!response.granted());
        QCOMPARE(response.holder(), kPrimary);
        QCOMPARE(response.promised_ms(), int64_t(990));
    }
};

QTEST_APPLESS_MAIN(TestLease)
#include "tst_lease.moc"
