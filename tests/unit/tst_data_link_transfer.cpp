// A data link's two ends (wire/data_link.h) in one process, on real loopback
// sockets: tensors larger than the sockets' buffers arrive whole both ways,
// whether the sender waits on its own thread or overlaps on the link's I/O
// thread; a peer that goes mid-transfer, or sends nothing, is reported with
// why, and the link stays failed. The protocol against parasync-node is in
// tests/integration/tst_data_link.cpp. Frames (whole messages on a link)
// come apart where they should, and a reader between frames waits until it
// is told to stop.
#include "wire/data_link.h"

#include <QElapsedTimer>
#include <QTest>

#include <cstring>

#include <numeric>
#include <thread>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

// Four tensors of 16 MB in all: far beyond loopback's socket buffers, so
// every transfer waits for the other end many times.
std::vector<std::vector<float>> sentTensors()
{
    std::vector<std::vector<float>> tensors{std::vector<float>(3'000'000), std::vector<float>(7),
                                            std::vector<float>(1'000'000), std::vector<float>(2)};
    float next = 0.5f;
    for (auto &t : tensors)
        for (float &v : t)
            v = (next += 1.25f);
    return tensors;
}

std::vector<std::vector<float>> sameShapes(const std::vector<std::vector<float>> &tensors)
{
    std::vector<std::vector<float>> out;
    for (const auto &t : tensors)
        out.emplace_back(t.size(), -1.0f);
    return out;
}

TensorValues valuesOf(const std::vector<std::vector<float>> &tensors)
{
    TensorValues values;
    for (const auto &t : tensors)
        values.emplace_back(t.data(), t.size());
    return values;
}

TensorDestinations destinationsOf(std::vector<std::vector<float>> &tensors)
{
    TensorDestinations destinations;
    for (auto &t : tensors)
        destinations.emplace_back(t.data(), t.size());
    return destinations;
}

// A worker's end and the ps's end of one link, made as a Train stream makes
// them: a grant, a greeting with its nonce, the ps's claim.
struct LinkPair
{
    explicit LinkPair(std::chrono::milliseconds stall) : acceptor("127.0.0.1", stall)
    {
        const DataLinkGrant grant = acceptor.grant();
        std::string error;
        worker = DataLink::connect(context, "127.0.0.1", grant.port, grant.nonce, 5s, stall, &error);
        if (!worker)
            qFatal("the worker's end did not connect: %s", error.c_str());
        ps = acceptor.claim(grant.nonce, 5s);
        if (!ps)
            qFatal("the ps did not claim the link");
    }

    DataLinkContext context;
    DataLinkAcceptor acceptor;
    std::unique_ptr<DataLink> worker;
    std::unique_ptr<DataLink> ps;
};

} // namespace

class TestDataLinkTransfer : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void tensorsLargerThanTheSocketBuffersArriveWholeBothWays()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();

        // The worker's push, sent on its own thread while the ps reads.
        auto received = sameShapes(sent);
        bool wrote = false;
        std::thread pusher([&] { wrote = link.worker->write(valuesOf(sent)); });
        const bool read = link.ps->read(destinationsOf(received));
        pusher.join();
        QVERIFY2(wrote, link.worker->error().c_str());
        QVERIFY2(read, link.ps->error().c_str());
        QVERIFY(received == sent);

        // The answer, the other way.
        auto answer = sameShapes(sent);
        std::thread answerer([&] { wrote = link.ps->write(valuesOf(sent)); });
        const bool readAnswer = link.worker->read(destinationsOf(answer));
        answerer.join();
        QVERIFY2(wrote, link.ps->error().c_str());
        QVERIFY2(readAnswer, link.worker->error().c_str());
        QVERIFY(answer == sent);

        const uint64_t bytes = 4 * uint64_t(3'000'000 + 7 + 1'000'000 + 2);
        QCOMPARE(link.worker->bytesSent(), bytes);
        QCOMPARE(link.ps->bytesReceived(), bytes);
        QCOMPARE(link.ps->bytesSent(), bytes);
        QCOMPARE(link.worker->bytesReceived(), bytes);
    }

    // startWrite() returns before the ps has read anything: what the socket
    // did not take goes on the I/O thread, and the worker's next read on the
    // link waits for it to have gone.
    void anOverlappedWriteGoesOnWhileTheCallerGoesOn()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();
        QVERIFY2(link.worker->startWrite(valuesOf(sent)), link.worker->error().c_str());

        auto received = sameShapes(sent);
        std::thread ps([&] {
            if (link.ps->read(destinationsOf(received)))
                link.ps->write(valuesOf(received));
        });
        auto answer = sameShapes(sent);
        const bool read = link.worker->read(destinationsOf(answer));
        ps.join();
        QVERIFY2(read, link.worker->error().c_str());
        QVERIFY(received == sent);
        QVERIFY(answer == sent);
    }

    // Between overlapped writes the link's descriptor is out of the I/O
    // thread's reactor and lent back for each: many in a row, each waited
    // for by the next, all arrive in order.
    void overlappedWritesOneAfterAnotherArriveInOrder()
    {
        LinkPair link(5s);
        std::vector<std::vector<std::vector<float>>> rounds;
        for (int round = 0; round < 4; ++round) {
            auto tensors = sentTensors();
            tensors[1][0] = float(round); // tells the rounds apart
            rounds.push_back(std::move(tensors));
        }
        std::vector<std::vector<std::vector<float>>> received;
        std::thread ps([&] {
            for (const auto &round : rounds) {
                auto into = sameShapes(round);
                if (!link.ps->read(destinationsOf(into)))
                    return;
                received.push_back(std::move(into));
            }
        });
        bool started = true;
        for (const auto &round : rounds)
            started = started && link.worker->startWrite(valuesOf(round));
        const bool finished = link.worker->finishWrites();
        ps.join();
        QVERIFY2(started && finished, link.worker->error().c_str());
        QVERIFY2(received.size() == rounds.size(), link.ps->error().c_str());
        QVERIFY(received == rounds);
    }

    // The ps stops reading: the rest of an overlapped write, on the I/O
    // thread, moves nothing, and after the stall the worker is told so,
    // with the link closed; nothing hangs, and the link goes cleanly.
    void anOverlappedWriteThePeerNeverReadsEndsAfterTheStall()
    {
        LinkPair link(300ms);
        const auto sent = sentTensors();
        QVERIFY2(link.worker->startWrite(valuesOf(sent)), link.worker->error().c_str());
        QVERIFY(!link.worker->finishWrites());
        QCOMPARE(QString::fromStdString(link.worker->error()),
                 QStringLiteral("sending on the data link failed: no byte moved for 300 ms"));
        std::vector<float> more(4);
        QVERIFY(!link.worker->read({std::span<float>(more)}));
        // The ps's end finds the link ended once it reads past what came.
        auto received = sameShapes(sent);
        QVERIFY(!link.ps->read(destinationsOf(received)));
        link.worker.reset();
        link.ps.reset();
    }

    void aPeerThatGoesMidTransferIsReportedAndTheLinkStaysFailed()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();
        auto received = sameShapes(sent);
        // Half of what the ps waits for, then the worker's end closes.
        std::thread worker([&] {
            const std::vector<float> half(2'000'000, 1.0f);
            link.worker->write({std::span<const float>(half)});
            link.worker.reset();
        });
        const bool read = link.ps->read(destinationsOf(received));
        worker.join();
        QVERIFY(!read);
        QVERIFY2(link.ps->error().find("receiving on the data link failed: the other end closed it") == 0,
                 link.ps->error().c_str());
        const std::vector<float> more(4, 1.0f);
        QVERIFY(!link.ps->write({std::span<const float>(more)}));
    }

    void aPeerThatSendsNothingEndsTheReadAfterTheStall()
    {
        LinkPair link(300ms);
        std::vector<float> gradient(1'000);
        QVERIFY(!link.ps->read({std::span<float>(gradient)}));
        QCOMPARE(QString::fromStdString(link.ps->error()),
                 QStringLiteral("receiving on the data link failed: no byte moved for 300 ms"));
        // The ps shut the link down: the worker's end sees it closed.
        QVERIFY(!link.worker->read({std::span<float>(gradient)}));
        QVERIFY2(link.worker->error().find("the other end closed it") != std::string::npos,
                 link.worker->error().c_str());
    }

    // Frames (DataLinkGrant.messages): a message, then values, in one go;
    // frames that follow each other closely come apart where they should,
    // whatever the receiver's inbox took along with the first.
    void framesAndTheValuesAfterThemArriveInOrder()
    {
        LinkPair link(5s);
        const auto sent = sentTensors();
        std::string small;
        DataLink::startFrame(&small);
        small += "a small message";
        std::string head;
        DataLink::startFrame(&head);
        head += std::string(100'000, 'h'); // beyond the inbox
        std::string empty;
        DataLink::startFrame(&empty);
        const std::vector<float> few{1.5f, -2.25f};
        bool wrote = false;
        std::thread worker([&] {
            wrote = link.worker->writeFrame(small, {std::span<const float>(few)}, false)
                    && link.worker->writeFrame(head, valuesOf(sent), true) && link.worker->writeFrame(empty, {}, false);
        });
        const auto keepWaiting = [] { return true; };
        std::string message;
        QCOMPARE(link.ps->readFrame(&message, 1 << 20, keepWaiting), DataLink::FrameRead::Read);
        QCOMPARE(message, std::string("a small message"));
        std::vector<float> fewReceived(2);
        QVERIFY2(link.ps->read({std::span<float>(fewReceived)}), link.ps->error().c_str());
        QVERIFY(fewReceived == few);
        QCOMPARE(link.ps->readFrame(&message, 1 << 20, keepWaiting), DataLink::FrameRead::Read);
        QCOMPARE(message, std::string(100'000, 'h'));
        auto received = sameShapes(sent);
        QVERIFY2(link.ps->read(destinationsOf(received)), link.ps->error().c_str());
        QVERIFY(received == sent);
        QCOMPARE(link.ps->readFrame(&message, 1 << 20, keepWaiting), DataLink::FrameRead::Read);
        QCOMPARE(message, std::string());
        worker.join();
        QVERIFY2(wrote, link.worker->error().c_str());
        const uint64_t bytes = 3 * kFrameLengthBytes + 15 + 8 + 100'000 + 4 * uint64_t(3'000'000 + 7 + 1'000'000 + 2);
        QCOMPARE(link.worker->bytesSent(), bytes);
        QCOMPARE(link.ps->bytesReceived(), bytes);

        // The worker closes its end between frames: the stream is over.
        link.worker.reset();
        QCOMPARE(link.ps->readFrame(&message, 1 << 20, keepWaiting), DataLink::FrameRead::Closed);
    }

    // Between frames a reader waits as long as it is told to -- past the
    // stall, which bounds only a frame that has begun -- and stops when told.
    void aReaderWaitsForTheNextFrameUntilToldToStop()
    {
        LinkPair link(300ms);
        QElapsedTimer waited;
        waited.start();
        int asked = 0;
        std::string message;
        QCOMPARE(link.ps->readFrame(&message, 1 << 20, [&] { return waited.elapsed() < 1000 || (++asked, false); }),
                 DataLink::FrameRead::Abandoned);
        QVERIFY(waited.elapsed() >= 1000);
        QCOMPARE(asked, 1);
        // The other end sees the link closed.
        QCOMPARE(link.worker->readFrame(&message, 1 << 20, nullptr), DataLink::FrameRead::Closed);
    }

    // shutdown() from another thread wakes a reader that waits with no bound.
    void aShutdownWakesAReaderWaitingForAFrame()
    {
        LinkPair link(5s);
        std::thread other([&] {
            std::this_thread::sleep_for(200ms);
            link.worker->shutdown();
        });
        std::string message;
        QCOMPARE(link.worker->readFrame(&message, 1 << 20, nullptr), DataLink::FrameRead::Closed);
        other.join();
    }

    // A hostile length is refused before anything is allocated for it; a
    // frame cut short is a broken link, not the end of the stream.
    void aFrameTooLongOrCutShortIsRefused()
    {
        {
            LinkPair link(5s);
            std::string frame;
            DataLink::startFrame(&frame);
            frame += std::string(2000, 'x');
            QVERIFY(link.worker->writeFrame(frame, {}, false));
            std::string message;
            QCOMPARE(link.ps->readFrame(&message, 1000, nullptr), DataLink::FrameRead::TooLarge);
            QCOMPARE(QString::fromStdString(link.ps->error()),
                     QStringLiteral("a frame of 2000 bytes came on the data link, more than the 1000 a message may "
                                    "have (--max_message_bytes)"));
            QVERIFY(message.capacity() < 1000);
        }
        {
            LinkPair link(5s);
            // A length of 100 and 10 bytes of the message, then the end.
            std::vector<float> cut(3);
            const unsigned char bytes[12] = {100, 0, 0, 0};
            std::memcpy(cut.data(), bytes, sizeof bytes);
            QVERIFY(link.worker->write({std::span<const float>(cut)}));
            link.worker.reset();
            std::string message;
            QCOMPARE(link.ps->readFrame(&message, 1 << 20, nullptr), DataLink::FrameRead::Failed);
            QVERIFY2(link.ps->error().find("the other end closed it") != std::string::npos, link.ps->error().c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestDataLinkTransfer)
#include "tst_data_link_transfer.moc"
