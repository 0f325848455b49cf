// Apache Curator's InterProcessMutex on a ZooKeeper ensemble as a lockcheck
// lock client program (the client protocol, version 1: docs/clients.md).
//
// acquire is InterProcessMutex.acquire(0 ms) under /lockcheck-curator/<key>:
// Curator creates a protected ephemeral sequential znode and the grant goes
// to the lowest; a contender's znode is deleted again and the reply is error
// 40. release is InterProcessMutex.release(). The lock lives as long as the
// client's session, so acquire_ok reports the session timeout the ensemble
// negotiated as the lease. The fence is the lock znode's sequence number plus
// one: ZooKeeper draws it from the parent's child counter, which rises with
// every znode created under the parent, so every grant of a key has a higher
// number than the one before, for as long as the parent lives. Curator would
// make the parent a container znode, which ZooKeeper deletes once it is empty
// (and the numbers start again at 0): dontUseContainerParents() keeps it.
//
// Curator's connection state LOST (the ensemble said the session expired)
// is sent as lost for every grant held, a grant whose release is in flight
// included. SUSPENDED is not: the session, and its znodes, may live on.
//
// Every request is served on the main thread: InterProcessMutex belongs to
// the thread that acquired it, and only that thread may release it.
//
// stdout is the protocol's alone: System.out is pointed at stderr before any
// library is loaded, so that nothing a library prints can break a line of
// the protocol; the JVM's own messages go to stderr with
// -XX:+DisplayVMOutputToStderr and -Xlog:all=warning:stderr (the launcher
// that build.sh writes passes both).

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.imps.CuratorFrameworkState;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryUntilElapsed;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.server.ServerCnxnFactory;
import org.apache.zookeeper.server.ZooKeeperServer;

public final class CuratorLock {
    static final String ROOT = "/lockcheck-curator/";
    // Error codes of the protocol.
    static final int TIMEOUT = 0, NOT_SUPPORTED = 10, MALFORMED = 12, CRASH = 13, LOCK_HELD = 40, NOT_SENT = 41;

    /** The protocol's stdout, taken before anything else can write to it. */
    static PrintStream out;

    /** A request's error reply. */
    static final class Failure extends Exception {
        final int code;

        Failure(int code, String text) {
            super(text);
            this.code = code;
        }
    }

    /** A grant: its key, its client and its mutex (which only the main thread touches). */
    record Grant(String key, CuratorFramework client, InterProcessMutex mutex) {}

    /** InterProcessMutex with its lock znode's path, which it keeps protected. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    CuratorFrameworkFactory.Builder builder;
    /** The client; replaced by a new one after a LOST (see start). */
    volatile CuratorFramework zk;
    /** The last client that was LOST, and is being closed. */
    volatile CuratorFramework lost;
    long timeoutMs;
    int connectMs;
    /** The grants held, by token (the lock znode's path). */
    final Map<String, Grant> grants = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length == 1 && args[0].equals("--train")) {
            train();
            System.exit(0); // the archive is written at exit; halt would skip it
            return;
        }
        new CuratorLock().serve(System.in);
        // EOF: exit at once, releasing nothing (lockcheck released what it
        // meant to), and without waiting for Curator's threads.
        out.flush();
        Runtime.getRuntime().halt(0);
    }

    /**
     * Loads the classes a run needs, for build.sh's class-data archive
     * (-XX:ArchiveClassesAtExit): two clients of a ZooKeeper server started
     * in this JVM on loopback take turns on a lock through the protocol's
     * messages, and one asks a server that is not there. What they send
     * goes nowhere.
     */
    static void train() throws Exception {
        out = new PrintStream(OutputStream.nullOutputStream());
        Path dir = Files.createTempDirectory("curator-lock-train");
        ZooKeeperServer server = new ZooKeeperServer(dir.toFile(), dir.toFile(), 100);
        ServerCnxnFactory net = ServerCnxnFactory.createFactory(new InetSocketAddress("127.0.0.1", 0), 16);
        net.startup(server);
        String init = "{\"type\":\"init\",\"msg_id\":1,\"addrs\":[\"127.0.0.1:" + net.getLocalPort() + "\"],\"ttl_ms\":1000,\"timeout_ms\":1000}\n";
        try {
            CuratorLock a = new CuratorLock(), b = new CuratorLock();
            b.serve(new ByteArrayInputStream(init.getBytes(StandardCharsets.UTF_8)));
            a.serve(new ByteArrayInputStream((init
                    + "{\"type\":\"acquire\",\"msg_id\":2,\"key\":\"train\"}\n"
                    + "{\"type\":\"inspect\",\"msg_id\":3,\"key\":\"train\"}\n"
                    + "{\"type\":\"extend\",\"msg_id\":4,\"key\":\"train\"}\n").getBytes(StandardCharsets.UTF_8)));
            try {
                b.acquire("train");
            } catch (Failure refused) {
                // held by a: error 40
            }
            for (String token : List.copyOf(a.grants.keySet())) {
                a.release(token);
                a.release(token);
            }
            b.release(b.acquire("train").get("token").toString());
            a.zk.close();
            b.zk.close();
            CuratorLock nowhere = new CuratorLock();
            nowhere.init(Json.object(Json.parse("{\"addrs\":[\"127.0.0.1:1\"],\"ttl_ms\":1000,\"timeout_ms\":200}")), 0);
            try {
                nowhere.acquire("train");
            } catch (Failure notSent) {
                // not connected: error 41
            }
            nowhere.zk.close();
        } finally {
            net.shutdown();
            server.shutdown();
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    void serve(InputStream in) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        for (String line; (line = r.readLine()) != null; ) {
            Map<String, Object> req;
            try {
                req = Json.object(Json.parse(line));
            } catch (IllegalArgumentException e) {
                System.err.println("not a JSON object: " + e.getMessage());
                continue;
            }
            String type = String.valueOf(req.get("type"));
            if (!req.containsKey("msg_id")) {
                continue; // an unasked message (failpoint_ok): none is asked for
            }
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("in_reply_to", req.get("msg_id"));
            try {
                Map<String, Object> fields = switch (type) {
                    case "init" -> init(req, 2000);
                    case "acquire" -> acquire((String) req.get("key"));
                    case "release" -> release((String) req.get("token"));
                    case "inspect" -> inspect((String) req.get("key"));
                    default -> throw new Failure(NOT_SUPPORTED, "unsupported request type " + type);
                };
                reply.put("type", type + "_ok");
                reply.putAll(fields);
            } catch (Failure f) {
                reply.put("type", "error");
                reply.put("code", (long) f.code);
                reply.put("text", f.getMessage());
            } catch (Exception e) {
                // The library failed in a way nobody knows the outcome of.
                e.printStackTrace();
                reply.put("type", "error");
                reply.put("code", (long) CRASH);
                reply.put("text", e.toString());
            }
            send(reply);
        }
    }

    static void send(Map<String, Object> m) {
        String line = Json.write(m);
        synchronized (out) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    /**
     * Starts Curator on the ensemble and waits up to connectWaitMs for its
     * first connection. A client that is not connected by then still
     * answers init_ok: Curator goes on trying, and an acquire meanwhile is
     * error 41 (nothing was sent).
     */
    Map<String, Object> init(Map<String, Object> req, int connectWaitMs) throws Exception {
        timeoutMs = ((Number) req.get("timeout_ms")).longValue();
        int sessionMs = (int) ((Number) req.get("ttl_ms")).longValue();
        // An operation waits for a connection at most connectMs, and
        // Curator retries one that lost its connection (its protected
        // create finds the znode a lost reply left, so a retried acquire
        // never mistakes its own znode for another client's) until a third of
        // timeout_ms is gone, sleeping 50 ms between tries: the reply comes
        // before lockcheck gives up on it. A policy that never sleeps
        // (RetryNTimes(0, 0)) makes Curator's background clean-up (its
        // guaranteed delete, its search for a protected znode left behind)
        // retry without pause, and spin.
        connectMs = (int) Math.max(50, timeoutMs / 5);
        @SuppressWarnings("unchecked")
        List<Object> addrs = (List<Object>) req.get("addrs");
        StringBuilder connect = new StringBuilder();
        for (Object a : addrs) {
            connect.append(connect.length() == 0 ? "" : ",").append(a);
        }
        builder = CuratorFrameworkFactory.builder()
                .connectString(connect.toString())
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(connectMs)
                .retryPolicy(new RetryUntilElapsed((int) (timeoutMs / 3), 50))
                .dontUseContainerParents();
        zk = start();
        if (connectWaitMs > 0) {
            zk.blockUntilConnected(connectWaitMs, TimeUnit.MILLISECONDS);
        }
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("library", "Apache Curator InterProcessMutex");
        fields.put("version", version());
        fields.put("supports", Map.of("extend", false, "inspect", true, "fence", true));
        fields.put("failpoints", List.of());
        return fields;
    }

    /**
     * Starts a client whose LOST (the session expired, or Curator's own
     * clock says it must have: it was disconnected for a whole session
     * timeout, and it injected an expiration) is sent as lost for every
     * grant held, and closes that client (timeout_ms later, once a request
     * in flight on it has had its answer): after an injected expiration,
     * Curator 5.4's guaranteed delete of a znode on the closed connection
     * recursed until StackOverflowError, 1,529 times in one 10 s run, a
     * core spinning (CURATOR-106); a closed client retries nothing. The
     * next request starts a new one (current).
     */
    CuratorFramework start() {
        CuratorFramework c = builder.build();
        c.getConnectionStateListenable().addListener((client, state) -> {
            if (state != ConnectionState.LOST) {
                return;
            }
            for (String token : grants.keySet()) {
                Grant g = grants.remove(token);
                if (g != null) {
                    send(Map.of("type", "lost", "key", g.key(), "token", token,
                            "why", "Curator: connection state LOST (the session expired)"));
                }
            }
            lost = client;
            // A request in flight on it (a release that found the session
            // expired) gets its answer first.
            Thread closer = new Thread(() -> {
                try {
                    Thread.sleep(timeoutMs);
                } catch (InterruptedException e) {
                    return;
                }
                client.close();
            }, "close-after-lost");
            closer.setDaemon(true);
            closer.start();
        });
        c.start();
        return c;
    }

    /** The client, a new one if the last was LOST. */
    CuratorFramework current() {
        if (zk == lost || zk.getState() != CuratorFrameworkState.STARTED) {
            zk = start();
        }
        return zk;
    }

    /** Curator's version, from its jar's Maven properties. */
    static String version() {
        try (InputStream in = InterProcessMutex.class.getResourceAsStream("/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    /**
     * Fails with NOT_SENT when the client has no connection within
     * connectMs: nothing has been sent to the service.
     */
    void connected() throws Failure, InterruptedException {
        CuratorFramework zk = current();
        if (!zk.getZookeeperClient().isConnected() && !zk.blockUntilConnected(connectMs, TimeUnit.MILLISECONDS)) {
            throw new Failure(NOT_SENT, "not connected to ZooKeeper within " + connectMs + " ms; nothing was sent");
        }
    }

    Map<String, Object> acquire(String key) throws Exception {
        connected();
        CuratorFramework zk = current();
        Mutex m = new Mutex(zk, ROOT + key);
        boolean granted;
        try {
            granted = m.acquire(0, TimeUnit.MILLISECONDS);
        } catch (KeeperException e) {
            throw new Failure(CRASH, e.toString()); // the create may have landed
        }
        if (!granted) {
            throw new Failure(LOCK_HELD, "held by another client");
        }
        String token = m.lockPath();
        grants.put(token, new Grant(key, zk, m));
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("token", token);
        fields.put("ttl_ms", (long) zk.getZookeeperClient().getLastNegotiatedSessionTimeoutMs());
        fields.put("fence", Long.parseLong(token.substring(token.length() - 10)) + 1);
        return fields;
    }

    /**
     * Curator's release ignores a znode that is gone (its session expired),
     * so whether it deleted one is whether one was there: the client looks
     * first. A znode gone is gone for good, so deleted false is certain; one
     * that expires between the look and the delete makes deleted true, which
     * says only that the lease ended no later than this release. When the
     * look fails, the release is made all the same: a znode left behind by
     * a session that lives on would hold the lock for nobody, for good (a
     * first version of this client did that, and lockcheck found the lock
     * orphaned). The grant stays listed until the release is done, so that
     * a LOST noticed on the way (a paused holder's first call reconnects
     * and finds its session expired) is still sent; lockcheck records it.
     */
    Map<String, Object> release(String token) throws Exception {
        Grant g = grants.get(token);
        if (g == null) {
            return Map.of("deleted", false); // lost with its session, or never ours
        }
        Boolean existed = look(g, token);
        if (!grants.containsKey(token)) {
            // LOST while it looked: the session expired, and its znodes
            // with it (a holder stopped past its session, woken up, learns
            // it here). The lost message is sent.
            return Map.of("deleted", false);
        }
        try {
            if (existed == null || existed) {
                g.mutex().release();
            }
        } catch (KeeperException.SessionExpiredException e) {
            existed = false;
        } catch (IllegalStateException e) {
            if (g.client() != lost) {
                throw e;
            }
            // LOST on the way, and its client closed, which ended the
            // session and its znodes (the lost message is sent).
            existed = false;
        } catch (KeeperException e) {
            // Whether the delete reached the server is unknown; Curator's
            // guaranteed delete goes on trying in the background.
            throw new Failure(CRASH, e.toString());
        } finally {
            grants.remove(token);
        }
        // Unknown before, and deleted now (or found gone): the lease ended
        // no later than this release.
        return Map.of("deleted", existed == null || existed);
    }

    /**
     * Whether the grant's znode is there (null: unknown). The look runs on
     * a thread of its own, and gives way to a LOST that comes meanwhile: a
     * client stopped past its session, woken up, reconnects, learns that
     * its session expired and retries the look on a new one, which can
     * take longer than lockcheck waits; the LOST comes first.
     */
    Boolean look(Grant g, String token) throws InterruptedException {
        CompletableFuture<Boolean> look = CompletableFuture.supplyAsync(() -> {
            try {
                return g.client().checkExists().forPath(token) != null;
            } catch (KeeperException.SessionExpiredException e) {
                return false; // ZooKeeper deleted the session's znodes with it
            } catch (Exception e) {
                System.err.println("release " + token + ": looking for the znode: " + e);
                return null;
            }
        });
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs * 3 / 4);
        while (!look.isDone() && grants.containsKey(token) && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        return look.getNow(null);
    }

    Map<String, Object> inspect(String key) throws Exception {
        connected();
        List<String> nodes = new ArrayList<>(new Mutex(current(), ROOT + key).getParticipantNodes());
        if (nodes.isEmpty()) {
            return Map.of("state", "free");
        }
        return Map.of("state", "held by " + nodes.get(0) + " (" + (nodes.size() - 1) + " znodes waiting behind it)");
    }

    /** Just enough JSON for the protocol: objects, arrays, strings, integers, booleans, null. */
    static final class Json {
        final String s;
        int i;

        Json(String s) {
            this.s = s;
        }

        static Object parse(String s) {
            Json j = new Json(s);
            Object v = j.value();
            j.space();
            if (j.i != s.length()) {
                throw new IllegalArgumentException("trailing characters at " + j.i);
            }
            return v;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(Object v) {
            if (!(v instanceof Map)) {
                throw new IllegalArgumentException("not an object");
            }
            return (Map<String, Object>) v;
        }

        void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        char next() {
            space();
            if (i >= s.length()) {
                throw new IllegalArgumentException("unexpected end");
            }
            return s.charAt(i);
        }

        void expect(char c) {
            if (next() != c) {
                throw new IllegalArgumentException("expected " + c + " at " + i);
            }
            i++;
        }

        Object value() {
            char c = next();
            switch (c) {
                case '{': {
                    Map<String, Object> m = new LinkedHashMap<>();
                    i++;
                    if (next() == '}') {
                        i++;
                        return m;
                    }
                    do {
                        space();
                        String k = string();
                        expect(':');
                        m.put(k, value());
                    } while (comma());
                    expect('}');
                    return m;
                }
                case '[': {
                    List<Object> l = new ArrayList<>();
                    i++;
                    if (next() == ']') {
                        i++;
                        return l;
                    }
                    do {
                        l.add(value());
                    } while (comma());
                    expect(']');
                    return l;
                }
                case '"':
                    return string();
                default:
                    int start = i;
                    while (i < s.length() && "+-0123456789.eEtruefalsn".indexOf(s.charAt(i)) >= 0) {
                        i++;
                    }
                    String w = s.substring(start, i);
                    switch (w) {
                        case "true": return true;
                        case "false": return false;
                        case "null": return null;
                    }
                    try {
                        return Long.parseLong(w);
                    } catch (NumberFormatException e) {
                        try {
                            return Double.parseDouble(w);
                        } catch (NumberFormatException e2) {
                            throw new IllegalArgumentException("bad value at " + start);
                        }
                    }
            }
        }

        boolean comma() {
            if (next() == ',') {
                i++;
                return true;
            }
            return false;
        }

        String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw new IllegalArgumentException("unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> b.append(e);
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        static void write(StringBuilder b, Object v) {
            if (v instanceof Map<?, ?> m) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    b.append(first ? "" : ",");
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List<?> l) {
                b.append('[');
                for (int k = 0; k < l.size(); k++) {
                    b.append(k == 0 ? "" : ",");
                    write(b, l.get(k));
                }
                b.append(']');
            } else if (v instanceof String str) {
                quote(b, str);
            } else {
                b.append(v); // Long, Boolean, null
            }
        }

        static void quote(StringBuilder b, String str) {
            b.append('"');
            for (int k = 0; k < str.length(); k++) {
                char c = str.charAt(k);
                switch (c) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                    }
                }
            }
            b.append('"');
        }
    }
}
