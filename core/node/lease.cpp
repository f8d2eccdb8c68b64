#include "node/lease.h"

#include <algorithm>

namespace parasync {

namespace {

std::string milliseconds(std::chrono::milliseconds ms)
{
    return std::to_string(ms.count()) + " ms";
}

} // namespace

LeaseVote::LeaseVote(std::string voter, LeaseClock::time_point startedAt, std::chrono::milliseconds lease)
    : m_voter(std::move(voter))
    , m_quietUntil(startedAt + lease)
{
}

LeaseVote::Answer LeaseVote::ask(const std::string &candidate, int64_t epoch, std::chrono::milliseconds lease,
                                 LeaseClock::time_point now, int64_t aloneTurn, int64_t holdsTurn)
{
    Answer answer;
    const auto left
        = [now](LeaseClock::time_point until) { return std::chrono::ceil<std::chrono::milliseconds>(until - now); };
    if (epoch < m_epoch) {
        answer.epoch = m_epoch;
        answer.holder = m_holder;
        answer.reason = m_voter + " has seen epoch " + std::to_string(m_epoch) + " begin"
                        + (m_holder.empty() ? std::string() : " (at " + m_holder + ")") + ", after epoch "
                        + std::to_string(epoch);
        return answer;
    }
    if (now < m_quietUntil) {
        answer.epoch = m_epoch;
        answer.left = left(m_quietUntil);
        answer.reason = m_voter + " started less than a lease ago and promises no vote for another "
                        + milliseconds(answer.left) + " (it may have promised it before it started again)";
        return answer;
    }
    if (!m_holder.empty() && m_holder != candidate && now < m_until) {
        answer.epoch = m_epoch;
        answer.holder = m_holder;
        answer.left = left(m_until);
        answer.reason = m_voter + " promised its vote to " + m_holder + " for another " + milliseconds(answer.left);
        return answer;
    }
    if (!m_holder.empty() && m_holder != candidate && epoch == m_epoch) {
        // Each holder serves under an epoch of its own: an answer's epoch
        // then names the process that gave it.
        answer.epoch = m_epoch;
        answer.holder = m_holder;
        answer.reason = m_voter + " promised epoch " + std::to_string(m_epoch) + " to " + m_holder
                        + " already: a new holder asks under a higher one";
        return answer;
    }
    if (!m_aloneHolder.empty() && m_aloneHolder != candidate && holdsTurn < m_aloneTurn) {
        // The candidate would serve without what the other acknowledged
        // alone: only once that process has been gone long enough to have
        // taken it with it.
        answer.servedAloneBy = m_aloneHolder;
        if (now < m_aloneUntil) {
            answer.epoch = m_epoch;
            answer.holder = m_holder;
            answer.left = left(m_aloneUntil);
            answer.reason = m_voter + " knows that " + m_aloneHolder
                            + " acknowledged updates without a backup holding them, which " + candidate
                            + " does not hold: it votes for " + candidate + " only once " + m_aloneHolder
                            + " has not asked for its lease for another " + milliseconds(answer.left)
                            + " (then those updates are lost)";
            return answer;
        }
        m_aloneHolder.clear();
    }
    m_holder = candidate;
    m_until = now + lease;
    m_epoch = epoch;
    if (aloneTurn > 0) {
        m_aloneHolder = candidate;
        m_aloneTurn = aloneTurn;
        m_aloneUntil = now + kAloneGraceLeases * lease;
    } else if (m_aloneHolder == candidate || holdsTurn >= m_aloneTurn) {
        m_aloneHolder.clear(); // its backup holds everything again, or the candidate does
    }
    answer.granted = true;
    answer.epoch = m_epoch;
    return answer;
}

void LeaseVote::sawEpoch(int64_t epoch)
{
    m_epoch = std::max(m_epoch, epoch);
}

void LeaseVote::release(const std::string &candidate)
{
    if (m_holder == candidate)
        m_until = LeaseClock::time_point{};
}

void LeaseHold::granted(const std::string &voter, LeaseClock::time_point askedAt, std::chrono::milliseconds lease)
{
    const auto counted = std::chrono::duration_cast<LeaseClock::duration>(lease * (1.0 - kLeaseClockDrift));
    m_until[voter] = askedAt + counted;
}

void LeaseHold::refused(const std::string &voter)
{
    m_until.erase(voter);
}

bool LeaseHold::held(LeaseClock::time_point now) const
{
    return until() > now;
}

LeaseClock::time_point LeaseHold::until() const
{
    LeaseClock::time_point last{};
    for (const auto &[voter, until] : m_until)
        last = std::max(last, until);
    return last;
}

LeaseVoter::LeaseVoter(ClusterSpec cluster, std::string name, std::vector<int> pairs, std::chrono::milliseconds lease,
                       LeaseClock::time_point startedAt)
    : m_cluster(std::move(cluster))
    , m_lease(lease)
{
    for (const int pair : pairs)
        m_votes.emplace(pair, LeaseVote(name, startedAt, lease));
}

std::string LeaseVoter::vote(const proto::VoteRequest &request, proto::VoteResponse *response,
                             LeaseClock::time_point now)
{
    const int pair = request.ps_index();
    const auto found = m_votes.find(pair);
    if (found == m_votes.end())
        return "a vote for ps:" + std::to_string(pair) + "'s lease asked of a voter that votes for "
               + (m_votes.size() == 1
                      ? "ps:" + std::to_string(m_votes.begin()->first) + "'s only"
                      : std::string("the pairs of ps:0 to ps:") + std::to_string(m_cluster.numPs() - 1));
    bool member = false;
    std::string members;
    for (const HostPort &address : m_cluster.psPair(pair)) {
        member = member || address.toString() == request.candidate();
        members += (members.empty() ? "" : " or ") + address.toString();
    }
    if (!member)
        return "a candidate at '" + request.candidate().substr(0, 256) + "' asked for ps:" + std::to_string(pair)
               + "'s lease, whose processes are " + members + ": give every task the same cluster";
    if (request.epoch() <= 0)
        return "a vote asked under epoch " + std::to_string(request.epoch()) + ": epochs begin at 1";
    if (request.lease_ms() < 1 || request.lease_ms() > m_lease.count())
        return "a vote asked for " + std::to_string(request.lease_ms()) + " ms; this voter promises 1 to "
               + std::to_string(m_lease.count()) + " ms (its --ps_lease_ms): give every task the same --ps_lease_ms";
    if (request.alone_turn() < 0 || request.holds_turn() < 0)
        return "a vote asked with alone_turn " + std::to_string(request.alone_turn()) + " and holds_turn "
               + std::to_string(request.holds_turn()) + ": turns are counted from 0";
    std::lock_guard lock(m_mutex);
    const LeaseVote::Answer answer
        = found->second.ask(request.candidate(), request.epoch(), std::chrono::milliseconds(request.lease_ms()), now,
                            request.alone_turn(), request.holds_turn());
    response->set_granted(answer.granted);
    response->set_served_alone_by(answer.servedAloneBy);
    response->set_epoch(answer.epoch);
    response->set_holder(answer.holder);
    response->set_promised_ms(answer.left.count());
    response->set_reason(answer.reason);
    return {};
}

LeaseVote::Answer LeaseVoter::askOwn(int pair, const std::string &candidate, int64_t epoch, LeaseClock::time_point now,
                                     int64_t aloneTurn, int64_t holdsTurn)
{
    std::lock_guard lock(m_mutex);
    return m_votes.at(pair).ask(candidate, epoch, m_lease, now, aloneTurn, holdsTurn);
}

void LeaseVoter::release(int pair, const std::string &candidate)
{
    std::lock_guard lock(m_mutex);
    m_votes.at(pair).release(candidate);
}

void LeaseVoter::sawEpoch(int pair, int64_t epoch)
{
    std::lock_guard lock(m_mutex);
    m_votes.at(pair).sawEpoch(epoch);
}

int64_t LeaseVoter::epoch(int pair) const
{
    std::lock_guard lock(m_mutex);
    return m_votes.at(pair).epoch();
}

} // namespace parasync
