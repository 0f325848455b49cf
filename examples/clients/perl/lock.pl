#!/usr/bin/perl
# The correct Redis lock recipe in Perl with Redis.pm, as a lockcheck client
# (protocol v1, docs/clients.md): acquire is SET key token NX PX ttl, then an
# INCR of lockcheck:fence:<key> for the fence (the counter lockcheck's own
# Redis client draws from); release and extend are Lua scripts that compare
# the token first, so a client whose lease ran out touches nobody else's lock.
# One thread, no failpoints: the protocol needs nothing more.
use strict;
use warnings;
use IO::Handle;
use JSON::PP;
use Redis;

my $RELEASE = q{if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end};
my $EXTEND  = q{if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end};

my $json = JSON::PP->new->canonical;
my ($redis, $server, $timeout, $ttl_ms);
STDOUT->autoflush(1);

sub send_msg { print $json->encode($_[0]), "\n" }

# The connection, made again after an error left it in an unknown state.
# Redis.pm's own reconnect is off: it would send a command twice, and a SET NX
# could take the lock the first time and be refused the second.
sub redis {
    $redis //= Redis->new(server => $server, reconnect => 0,
        cnx_timeout => $timeout, read_timeout => $timeout, write_timeout => $timeout);
    return $redis;
}

sub token {
    open(my $urandom, '<:raw', '/dev/urandom') or die "/dev/urandom: $!";
    read($urandom, my $bytes, 16) == 16 or die "/dev/urandom: short read";
    return unpack('H*', $bytes);
}

my %handlers = (
    init => sub {
        my ($req) = @_;
        die { code => 10, text => "Redis.pm runs this recipe on one Redis, not on " . scalar(@{ $req->{addrs} }) . " addresses" }
            if @{ $req->{addrs} } != 1;
        ($server, $ttl_ms, $timeout) = ($req->{addrs}[0], $req->{ttl_ms}, $req->{timeout_ms} / 1000);
        redis();
        return { library => 'Redis.pm', version => "$Redis::VERSION",
                 supports => { extend => JSON::PP::true, inspect => JSON::PP::true, fence => JSON::PP::true },
                 failpoints => [] };
    },
    acquire => sub {
        my ($req) = @_;
        my $token = token();
        my $ok = redis()->set($req->{key}, $token, 'PX', $ttl_ms, 'NX');
        die { code => 40, text => 'held by another client' } unless defined $ok;
        my $fence = redis()->incr("lockcheck:fence:$req->{key}");
        return { token => $token, ttl_ms => $ttl_ms, fence => 0 + $fence };
    },
    release => sub {
        my ($req) = @_;
        my $n = redis()->eval($RELEASE, 1, $req->{key}, $req->{token});
        return { deleted => $n ? JSON::PP::true : JSON::PP::false };
    },
    extend => sub {
        my ($req) = @_;
        my $n = redis()->eval($EXTEND, 1, $req->{key}, $req->{token}, $ttl_ms);
        return { extended => $n ? JSON::PP::true : JSON::PP::false, ttl_ms => $ttl_ms };
    },
    inspect => sub {
        my ($req) = @_;
        my $key   = $req->{key};
        my $pttl  = redis()->pttl($key);
        return { state => "$key is free" } if $pttl == -2;
        my $holder = redis()->get($key) // '?';
        return { state => "held by $holder with no TTL: it never expires" } if $pttl == -1;
        return { state => "held by $holder, $pttl ms left" };
    },
);

# A Redis.pm error: a read timeout leaves the outcome unknown (code 0), a
# connection never made certainly did nothing (11), and anything else is
# unknown too (13).
sub error_of {
    my ($err) = @_;
    return $err if ref $err eq 'HASH';
    chomp(my $text = "$err");
    if ($text =~ /timed out|timeout/i) {
        $redis = undef;
        return { code => 0, text => $text };
    }
    return { code => 11, text => $text } if $text =~ /Could not connect|READONLY|NOREPLICAS/;
    print STDERR "$text\n";
    $redis = undef;
    return { code => 13, text => $text };
}

while (my $line = <STDIN>) {
    my $req = eval { $json->decode($line) };
    unless (ref $req eq 'HASH') {
        print STDERR "not a JSON object: ", substr($line, 0, 200);
        next;
    }
    next if ($req->{type} // '') eq 'failpoint_ok';
    my $handler = $handlers{ $req->{type} // '' };
    my $reply = eval {
        die { code => 10, text => "unsupported request type $req->{type}" } unless $handler;
        $handler->($req);
    };
    if (!$reply) {
        my $err = error_of($@);
        send_msg({ type => 'error', in_reply_to => $req->{msg_id}, code => $err->{code}, text => $err->{text} });
        next;
    }
    send_msg({ %$reply, type => "$req->{type}_ok", in_reply_to => $req->{msg_id} });
}
exit 0;
