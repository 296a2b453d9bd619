// End to end: the example server in a child process on a free loopback port, real HTTP requests through
// cpp-httplib's client, every status, header value and body checked against include/ratelimit/http/README.md "Header
// fields". The server runs with --manual-clock (time 0 at start, moved by the test), so every value is worked out by
// hand:
//
//   ip          FixedWindow{1000, 60 s}                    q=1000 w=60
//   free-minute FixedWindow{30, 60 s}                      q=30   w=60
//   free-day    FixedWindow{1000, 86400 s}                 q=1000 w=86400
//   free-burst  TokenBucket{10, 30 / 60 s}: T = 2 s        q=10   w=20
//   search      SlidingWindowLog{10, 60 s}                 q=10   w=60
//   login       SlidingWindowLog{5, 300 s}, penalty 900 s  q=5    w=300
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "server_process.hpp"

namespace {

const char* const kPolicyFree =
    "\"ip\";q=1000;w=60, \"free-minute\";q=30;w=60, \"free-day\";q=1000;w=86400, \"free-burst\";q=10;w=20";
}  // namespace

TEST(HttpServerE2E, HealthIsNotLimited) {
  ServerProcess server({"--manual-clock"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 50; ++i) {
    const auto r = c.Get("/health");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "ok\n");
    EXPECT_EQ(header(r, "RateLimit"), "<absent>");
  }
  EXPECT_EQ(server.stop(), 0);
}

TEST(HttpServerE2E, SearchHeadersDenialBodyAndRecovery) {
  ServerProcess server({"--manual-clock"});
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/search?q=x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(r->body).at("query"), "x");
  EXPECT_EQ(header(r, "RateLimit-Policy"), std::string(kPolicyFree) + ", \"search\";q=10;w=60");
  // t = 0, one request: burst backlog T = 2 s; windows end at 60 s and 86400 s.
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=999;t=60, \"free-minute\";r=29;t=60, \"free-day\";r=999;t=86400, \"free-burst\";r=9;t=2, "
            "\"search\";r=9;t=60");
  // Smallest remaining is 9 (burst and search); the tie goes to the longer reset: search.
  EXPECT_EQ(header(r, "X-RateLimit-Limit"), "10");
  EXPECT_EQ(header(r, "X-RateLimit-Remaining"), "9");
  EXPECT_EQ(header(r, "X-RateLimit-Reset"), "60");
  EXPECT_EQ(header(r, "Retry-After"), "<absent>");
  for (int i = 2; i <= 10; ++i) {
    r = c.Get("/search");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << i;
  }
  // 10 used: burst empty (backlog 20 s), search full (reset 60 s) -> classic shows search.
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=990;t=60, \"free-minute\";r=20;t=60, \"free-day\";r=990;t=86400, \"free-burst\";r=0;t=20, "
            "\"search\";r=0;t=60");
  EXPECT_EQ(header(r, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(header(r, "X-RateLimit-Reset"), "60");

  r = c.Get("/search");  // the 11th: burst (retry 2 s) and search (retry 60 s) deny
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
  // Nothing of the denied request is kept in the admitting layers: ip still 990, minute 20, day 990.
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=990;t=60, \"free-minute\";r=20;t=60, \"free-day\";r=990;t=86400, \"free-burst\";r=0;t=2, "
            "\"search\";r=0;t=60");
  EXPECT_EQ(header(r, "Retry-After"), "60");  // the longest wait binds
  EXPECT_EQ(header(r, "X-RateLimit-Limit"), "10");
  EXPECT_EQ(header(r, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(header(r, "X-RateLimit-Reset"), "60");
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body, (nlohmann::json{{"type", "https://iana.org/assignments/http-problem-types#quota-exceeded"},
                                  {"title", "Request cannot be satisfied as assigned quota has been exceeded"},
                                  {"status", 429},
                                  {"detail", "Retry after 60 s."},
                                  {"instance", "/search"},
                                  {"violated-policies", {"free-burst", "search"}},
                                  {"retry-after", 60}}));

  advance(c, 60'000);  // t = 60 s: new minute window, the log entries at 0 have left, bucket full
  r = c.Get("/search");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=999;t=60, \"free-minute\";r=29;t=60, \"free-day\";r=989;t=86340, \"free-burst\";r=9;t=2, "
            "\"search\";r=9;t=60");
  EXPECT_EQ(server.stop(), 0);
}

TEST(HttpServerE2E, ApiKeyPlansAndUnknownKeysAreFree) {
  ServerProcess server({"--manual-clock", "--api-key", "k-ent=enterprise"});
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/export", {{"X-API-Key", "demo-pro"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // pro: 300/min, 50,000/day, burst 50 refilling 300/min: T = 0.2 s, w = ceil(50 * 0.2) = 10.
  EXPECT_EQ(header(r, "RateLimit-Policy"),
            "\"ip\";q=1000;w=60, \"pro-minute\";q=300;w=60, \"pro-day\";q=50000;w=86400, \"pro-burst\";q=50;w=10, "
            "\"export\";q=5;w=60");
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=999;t=60, \"pro-minute\";r=299;t=60, \"pro-day\";r=49999;t=86400, \"pro-burst\";r=49;t=1, "
            "\"export\";r=4;t=60");
  EXPECT_EQ(header(r, "X-RateLimit-Limit"), "5");
  r = c.Get("/export", {{"X-API-Key", "k-ent"}});
  ASSERT_TRUE(r);
  EXPECT_NE(header(r, "RateLimit-Policy").find("\"enterprise-burst\";q=200;w=4"), std::string::npos);  // T = 0.02 s
  r = c.Get("/export", {{"X-API-Key", "nobody"}});
  ASSERT_TRUE(r);
  EXPECT_NE(header(r, "RateLimit-Policy").find("\"free-minute\";q=30;w=60"), std::string::npos);
  // Each key has its own export quota (5 per minute per client).
  for (int i = 0; i < 4; ++i) ASSERT_EQ(c.Get("/export", {{"X-API-Key", "demo-pro"}})->status, 200);
  r = c.Get("/export", {{"X-API-Key", "demo-pro"}});
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(nlohmann::json::parse(r->body).at("violated-policies"), nlohmann::json::array({"export"}));
  EXPECT_EQ(c.Get("/export", {{"X-API-Key", "k-ent"}})->status, 200);
}

TEST(HttpServerE2E, LoginPenaltyOutlastsTheWindow) {
  ServerProcess server({"--manual-clock"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 5; ++i) {
    const auto r = c.Post("/login?user=demo&password=wrong");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 401) << i;
  }
  auto r = c.Post("/login?user=demo&password=demo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  // This denial starts the 15-minute penalty: it must say 900 s, not the window's 300 s (a client that
  // obeyed 300 s would be denied again).
  EXPECT_EQ(header(r, "Retry-After"), "900");
  EXPECT_EQ(header(r, "RateLimit").substr(0, 21), "\"ip\";r=995;t=60, \"fre");
  EXPECT_NE(header(r, "RateLimit").find("\"login\";r=0;t=900"), std::string::npos) << header(r, "RateLimit");
  EXPECT_EQ(header(r, "X-RateLimit-Reset"), "900");
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body.at("violated-policies"), nlohmann::json::array({"login"}));
  EXPECT_EQ(body.at("retry-after"), 900);
  EXPECT_EQ(body.at("detail"), "Retry after 900 s.");
  advance(c, 300'000);  // the window has passed, the 15-minute penalty has 10 minutes left
  r = c.Post("/login?user=demo&password=demo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(header(r, "Retry-After"), "600");
  // Penalized from memory: no other layer was checked, only the login policy is reported.
  EXPECT_EQ(header(r, "RateLimit"), "\"login\";r=0;t=600");
  advance(c, 600'000);
  r = c.Post("/login?user=demo&password=demo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  const std::string login = "ratelimit_decisions_total{layer=\"login\",outcome=";
  EXPECT_NE(metrics->body.find(login + "\"denied\"} 2\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find(login + "\"allowed\"} 6\n"), std::string::npos) << metrics->body;
}

TEST(HttpServerE2E, ForwardedForIsBelievedOnlyFromTrustedProxies) {
  {
    ServerProcess server({"--manual-clock", "--trusted-proxy", "127.0.0.1"});
    httplib::Client c("127.0.0.1", server.port());
    // Behind the trusted proxy, each forwarded client has its own IP quota; a client-supplied entry
    // left of the real client is ignored.
    auto a = c.Get("/nope", {{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}});
    auto b = c.Get("/nope", {{"X-Forwarded-For", "203.0.113.8"}});
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->status, 404);
    EXPECT_EQ(header(a, "RateLimit").substr(0, 15), "\"ip\";r=999;t=60");
    EXPECT_EQ(header(b, "RateLimit").substr(0, 15), "\"ip\";r=999;t=60");
    auto again = c.Get("/nope", {{"X-Forwarded-For", "10.9.9.9, 203.0.113.7"}});
    EXPECT_EQ(header(again, "RateLimit").substr(0, 15), "\"ip\";r=998;t=60");
  }
  {
    ServerProcess server({"--manual-clock"});
    httplib::Client c("127.0.0.1", server.port());
    auto a = c.Get("/nope", {{"X-Forwarded-For", "203.0.113.7"}});
    auto b = c.Get("/nope", {{"X-Forwarded-For", "203.0.113.8"}});
    ASSERT_TRUE(a && b);
    EXPECT_EQ(header(b, "RateLimit").substr(0, 15), "\"ip\";r=998;t=60");  // both are 127.0.0.1
  }
}

TEST(HttpServerE2E, ForwardedForLinesAreCombinedInOrder) {
  // RFC 9110 section 5.3: several X-Forwarded-For lines are one list, in order. Only the first line was
  // read, so a client repeating the field escaped the deny list and was limited as the address it chose.
  ServerProcess server(
      {"--manual-clock", "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "192.0.2.1", "--deny", "10.0.0.2"});
  httplib::Client c("127.0.0.1", server.port());
  auto one_line = c.Get("/nope", {{"X-Forwarded-For", "10.0.0.1, 10.0.0.2"}});
  ASSERT_TRUE(one_line);
  EXPECT_EQ(one_line->status, 403);
  auto two_lines = c.Get("/nope", {{"X-Forwarded-For", "10.0.0.1"}, {"X-Forwarded-For", "10.0.0.2"}});
  ASSERT_TRUE(two_lines);
  EXPECT_EQ(two_lines->status, 403);
  // Three lines, the last one a trusted proxy's: the right-most untrusted entry (10.0.0.2) is taken.
  auto three = c.Get(
      "/nope", {{"X-Forwarded-For", "10.0.0.1"}, {"X-Forwarded-For", "10.0.0.2"}, {"X-Forwarded-For", "192.0.2.1"}});
  ASSERT_TRUE(three);
  EXPECT_EQ(three->status, 403);
  // Two lines of one client: both requests count for 203.0.113.9, none for the spoofed 10.0.0.1.
  auto a = c.Get("/nope", {{"X-Forwarded-For", "10.0.0.1"}, {"X-Forwarded-For", "203.0.113.9"}});
  auto b = c.Get("/nope", {{"X-Forwarded-For", "203.0.113.9"}});
  auto spoofed = c.Get("/nope", {{"X-Forwarded-For", "10.0.0.1"}});
  ASSERT_TRUE(a && b && spoofed);
  EXPECT_EQ(a->status, 404);
  EXPECT_EQ(header(a, "RateLimit").substr(0, 15), "\"ip\";r=999;t=60");
  EXPECT_EQ(header(b, "RateLimit").substr(0, 15), "\"ip\";r=998;t=60");
  EXPECT_EQ(header(spoofed, "RateLimit").substr(0, 15), "\"ip\";r=999;t=60");
}

TEST(HttpServerE2E, DenialOfAPathThatIsNotUtf8IsAnOrdinary429) {
  // The 11th request of a free client (burst 10) for "/x%FF": a 500 without Retry-After before, because
  // the problem body's instance (the decoded path, byte 0xFF) made the JSON library throw.
  ServerProcess server({"--manual-clock"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 10; ++i) {
    const auto r = c.Get("/x%FF");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 404) << i;
  }
  const auto r = c.Get("/x%FF");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(header(r, "Retry-After"), "2");
  EXPECT_NE(header(r, "RateLimit"), "<absent>");
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body.at("instance"), "/x%FF");
  EXPECT_EQ(body.at("violated-policies"), nlohmann::json::array({"free-burst"}));
}

namespace {
/// Runs the server with `args` to its end; returns its exit status and what it wrote (stdout and stderr).
int run_server(std::vector<std::string> args, std::string& output) {
  args.insert(args.begin(), RATELIMIT_HTTP_SERVER);
  int out[2];
  if (pipe(out) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    alarm(20);  // a server that wrongly starts serving is killed (SIGALRM) instead of hanging the test
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) output.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
}  // namespace

TEST(HttpServerE2E, BadRedisAddressIsRefusedClearly) {
  // "--redis 127.0.0.1:abc" died of an uncaught std::stoi (abort, rc 134).
  for (const char* bad : {"127.0.0.1:abc", "127.0.0.1:70000", "[::1", "127.0.0.1:"}) {
    std::string output;
    const int rc = run_server({"--redis", bad, "--port", "0"}, output);
    EXPECT_NE(rc, 134) << bad;
    EXPECT_NE(rc, 0) << bad;
    EXPECT_LT(rc, 128) << bad << ": killed by a signal";
    EXPECT_NE(output.find("--redis"), std::string::npos) << output;
    EXPECT_NE(output.find("--redis: ConnectionOptions::from_url: "), std::string::npos) << output;
    EXPECT_NE(output.find("or HOST, HOST:PORT or [IPv6]:PORT"), std::string::npos) << output;
  }
}

TEST(HttpServerE2E, HelpShowsTheDefaults) {
  std::string output;
  EXPECT_EQ(run_server({"--help"}, output), 0);
  EXPECT_NE(output.find("8080"), std::string::npos) << output;       // --port
  EXPECT_NE(output.find("127.0.0.1"), std::string::npos) << output;  // --host
}

TEST(HttpServerE2E, DenyListedIpGetsForbidden) {
  ServerProcess server({"--manual-clock", "--deny", "127.0.0.1"});
  httplib::Client c("127.0.0.1", server.port());
  const auto r = c.Get("/search");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(header(r, "Retry-After"), "<absent>");
  EXPECT_EQ(nlohmann::json::parse(r->body).at("status"), 403);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(HttpServerE2E, NoLimitsServesWithoutHeaders) {
  ServerProcess server({"--no-limits"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 20; ++i) {
    const auto r = c.Get("/search");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(header(r, "RateLimit"), "<absent>");
  }
}

namespace {
/// True when no header of `r` carries exception text (cpp-httplib's default handler adds EXCEPTION_WHAT).
bool leaks_nothing(const httplib::Result& r) {
  for (const auto& [name, value] : r->headers) {
    if (name.find("EXCEPTION") != std::string::npos || value.find("max_key_bytes") != std::string::npos ||
        value.find("key:") != std::string::npos) {
      return false;
    }
  }
  return r->body.find("max_key_bytes") == std::string::npos && r->body.find("stoll") == std::string::npos;
}

nlohmann::json bare_problem(int status, const char* title) {
  return nlohmann::json{{"type", "about:blank"}, {"title", title}, {"status", status}};
}
}  // namespace

TEST(HttpServerE2E, RotatingUnknownApiKeysShareTheFreePlanOfTheIp) {
  ServerProcess server({"--manual-clock"});
  httplib::Client c("127.0.0.1", server.port());
  // /export allows 5 per minute per client; a client is its IP unless its key is in the directory.
  for (int i = 0; i < 5; ++i) {
    const auto r = c.Get("/export", {{"X-API-Key", "fake-" + std::to_string(i)}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << i;
    EXPECT_EQ(header(r, "RateLimit-Policy"), std::string(kPolicyFree) + ", \"export\";q=5;w=60");
  }
  auto r = c.Get("/export", {{"X-API-Key", "fake-5"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  // 5 admitted from one IP: minute 30 - 5, burst 10 - 5 (backlog 5 x 2 s), export used up.
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=995;t=60, \"free-minute\";r=25;t=60, \"free-day\";r=995;t=86400, \"free-burst\";r=5;t=10, "
            "\"export\";r=0;t=60");
  EXPECT_EQ(nlohmann::json::parse(r->body).at("violated-policies"), nlohmann::json::array({"export"}));
  r = c.Get("/export");  // a missing key is the same client
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  r = c.Get("/export", {{"X-API-Key", "demo-pro"}});  // a known key is a client of its own
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  // /search (10 per minute per client) and the free burst (10) are shared the same way: 5 more pass.
  for (int i = 0; i < 5; ++i) {
    r = c.Get("/search", {{"X-API-Key", "other-" + std::to_string(i)}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << i;
  }
  r = c.Get("/search", {{"X-API-Key", "other-5"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(nlohmann::json::parse(r->body).at("violated-policies"), nlohmann::json::array({"free-burst"}));
  EXPECT_EQ(server.stop(), 0);
}

TEST(HttpServerE2E, BadInputGets4xxAndNoClientSeesExceptionText) {
  ServerProcess server({"--manual-clock", "--trusted-proxy", "127.0.0.1"});
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/search", {{"X-API-Key", std::string(600, 'a')}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_EQ(nlohmann::json::parse(r->body), bare_problem(431, "Request Header Fields Too Large"));
  EXPECT_TRUE(leaks_nothing(r));
  r = c.Get("/search", {{"X-API-Key", std::string(257, 'a')}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);

  // A forwarded address no limiter takes (600 bytes > max_key_bytes 512).
  r = c.Get("/search", {{"X-Forwarded-For", std::string(600, '1')}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_EQ(nlohmann::json::parse(r->body), bare_problem(400, "Bad Request"));
  EXPECT_TRUE(leaks_nothing(r));

  // Any other exception (here std::stoll of "abc" in a route): a bare 500.
  r = c.Post("/__test/advance?ms=abc");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(nlohmann::json::parse(r->body), bare_problem(500, "Internal Server Error"));
  EXPECT_TRUE(leaks_nothing(r));

  // None of the rejected requests consumed anything; a 256-byte unknown key is an ordinary free client.
  r = c.Get("/search", {{"X-API-Key", std::string(256, 'a')}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(r, "RateLimit").rfind("\"ip\";r=999;t=60, \"free-minute\";r=29;t=60, ", 0), 0u)
      << header(r, "RateLimit");
  EXPECT_EQ(server.stop(), 0);
}

// --shadow: every layer in shadow mode. A burst past /export's 5 per minute is served (200, no
// Retry-After), and /metrics counts the would-be denials: exactly those an enforcing server gives.
TEST(HttpServerE2E, ShadowServesEverythingAndCountsWouldBeDenials) {
  ServerProcess shadow({"--manual-clock", "--shadow"});
  ServerProcess enforcing({"--manual-clock"});
  httplib::Client s("127.0.0.1", shadow.port());
  httplib::Client e("127.0.0.1", enforcing.port());
  int denied = 0;
  for (int i = 0; i < 8; ++i) {
    const auto rs = s.Get("/export");
    ASSERT_TRUE(rs);
    EXPECT_EQ(rs->status, 200) << i;
    EXPECT_EQ(header(rs, "Retry-After"), "<absent>") << i;
    EXPECT_EQ(header(rs, "RateLimit"), "<absent>") << i;  // shadow layers send no header fields
    const auto re = e.Get("/export");
    ASSERT_TRUE(re);
    if (re->status == 429) ++denied;
  }
  EXPECT_EQ(denied, 3);
  const auto m = s.Get("/metrics");
  ASSERT_TRUE(m);
  auto sample = [](const char* outcome, int n) {
    return "ratelimit_decisions_total{layer=\"export\",outcome=\"" + std::string(outcome) + "\"} " + std::to_string(n) +
           "\n";
  };
  EXPECT_NE(m->body.find(sample("shadow_denied", 3)), std::string::npos) << m->body;
  EXPECT_NE(m->body.find(sample("denied", 0)), std::string::npos) << m->body;
  EXPECT_NE(m->body.find(sample("allowed", 5)), std::string::npos) << m->body;
  EXPECT_EQ(shadow.stop(), 0);
}

// --plans: the plan numbers come from a JSON file, read again on SIGHUP; the reload keeps each key's
// usage (set_policy): 2 of a burst of 3 used, the burst raised to 5, then exactly 3 more pass. A file with
// one bad plan changes no plan (a reload used to apply the plans before the bad one).
TEST(HttpServerE2E, SighupReloadsPlansAndKeepsUsage) {
  const std::string path = ::testing::TempDir() + "ratelimit_plans_" + std::to_string(::getpid()) + ".json";
  auto write_plans = [&](int burst, const char* more) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "{\"free\": {\"per_minute\": 30, \"per_day\": 1000, \"burst\": %d}%s}\n", burst, more);
    std::fclose(f);
  };
  write_plans(3, "");
  ServerProcess server({"--manual-clock", "--plans", path});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 2; ++i) {
    const auto r = c.Get("/search?q=x");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << i;
  }
  write_plans(5, ", \"pro\": {\"per_minute\": 100000000000, \"per_day\": 1000, \"burst\": 5}");  // > 1/ns
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  usleep(300'000);                // the server applies the file on its signal thread (a real process: real time)
  auto r = c.Get("/search?q=x");  // the third of 3
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const std::string policy = header(r, "RateLimit-Policy");
  EXPECT_NE(policy.find("\"free-burst\";q=3;"), std::string::npos) << policy;  // free's burst still 3
  write_plans(5, "");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  usleep(300'000);
  int passed = 0;
  for (int i = 0; i < 6; ++i) {
    r = c.Get("/search?q=x");
    ASSERT_TRUE(r);
    if (r->status == 200) ++passed;
  }
  EXPECT_EQ(passed, 2);  // 5 - the 3 kept (a reload that forgot usage would pass 5)
  EXPECT_EQ(server.stop(), 0);
  std::remove(path.c_str());
}

// /export runs at most 2 at once per client (examples/README.md "The example"): a third concurrent export gets 429
// naming "export-concurrency", and consumes none of the export rate (5/min).
TEST(ConcurrencyLimiterHttpExport, AtMostTwoExportsAtOnceAndADenialConsumesNoRate) {
  using namespace std::chrono_literals;
  ServerProcess server({"--manual-clock"});
  std::vector<std::thread> running;
  std::vector<int> statuses(2, 0);
  for (int i = 0; i < 2; ++i) {
    running.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server.port());
      const auto r = c.Get("/export?hold_ms=1500");
      statuses[static_cast<std::size_t>(i)] = r ? r->status : -1;
    });
  }
  std::this_thread::sleep_for(500ms);  // both exports are in their handlers on the real server
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/export");
  for (auto& t : running) t.join();  // before any assertion can return
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(header(r, "Retry-After"), "1");
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body.at("violated-policies"), nlohmann::json::array({"export-concurrency"}));
  EXPECT_EQ(body.at("in-flight"), 2);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
  r = c.Get("/export");  // room again; the denied one consumed no rate: 3 of 5 used
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(header(r, "RateLimit").find("\"export\";r=2;"), std::string::npos) << header(r, "RateLimit");
  EXPECT_EQ(server.stop(), 0);
}
