#!/bin/sh
# Builds the Curator lock client into DIR (default: build/ beside this
# script): curator-lock.jar, the archive of its loaded classes
# (curator-lock.jsa) and curator-lock, the command to give --client.
#
# A JVM that loads Curator and ZooKeeper from their jars spends most of a
# second verifying and linking classes; five of them starting at once on a
# busy machine can miss lockcheck's init timeout. The launcher starts it
# from a class-data archive of the classes a run loads (made here by a
# training run, -XX:ArchiveClassesAtExit), with the C1 compiler only
# (-XX:TieredStopAtLevel=1: a lock client never runs long enough for C2 to
# pay off), the serial collector and a small heap. It keeps the JVM's own
# messages (a warning that the archive no longer matches a jar, after an
# upgrade) off stdout, which is the protocol's.
#
# Needs Debian's openjdk-17-jdk-headless, libcurator-recipes-java (which
# brings libcurator-framework-java, libcurator-client-java and
# libzookeeper-java) and libslf4j-java.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
java_dir=/usr/share/java
# Curator's jars name their dependencies in their manifests; slf4j-simple
# writes the libraries' warnings to stderr, the program's log.
jars="curator-recipes.jar curator-framework.jar curator-client.jar zookeeper.jar zookeeper-jute.jar guava.jar slf4j-api.jar slf4j-simple.jar"
cp=""
manifest_cp=""
for j in $jars; do
  [ -f "$java_dir/$j" ] || { echo "build.sh: $java_dir/$j is missing (apt-get install libcurator-recipes-java libslf4j-java)" >&2; exit 1; }
  cp="$cp${cp:+:}$java_dir/$j"
  manifest_cp="$manifest_cp $java_dir/$j"
done
rm -rf "$out/classes"
mkdir -p "$out/classes"
javac -nowarn -encoding UTF-8 --release 17 -cp "$cp" -d "$out/classes" "$here/CuratorLock.java"
# A manifest's lines are at most 72 bytes; a longer one goes on in lines
# that start with a blank.
{
  echo "Main-Class: CuratorLock"
  echo "Class-Path:$manifest_cp" | fold -w 70 | sed '2,$s/^/ /'
} >"$out/manifest.txt"
jar --create --file "$out/curator-lock.jar" --manifest "$out/manifest.txt" -C "$out/classes" .
rm -rf "$out/classes" "$out/manifest.txt"

flags="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms16m -Xmx128m -XX:-UsePerfData -XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning:stderr -Dorg.slf4j.simpleLogger.defaultLogLevel=warn"
rm -f "$out/curator-lock.jsa"
# shellcheck disable=SC2086 # flags are words
java $flags -XX:ArchiveClassesAtExit="$out/curator-lock.jsa" -cp "$out/curator-lock.jar:$cp" CuratorLock --train 2>"$out/train.log" ||
  { echo "build.sh: the training run failed:" >&2; cat "$out/train.log" >&2; exit 1; }
cat >"$out/curator-lock" <<EOF
#!/bin/sh
# Written by $here/build.sh: the Curator lock client, for --client.
exec java $flags -XX:SharedArchiveFile='$out/curator-lock.jsa' -cp '$out/curator-lock.jar:$cp' CuratorLock "\$@"
EOF
chmod +x "$out/curator-lock"
echo "$out/curator-lock"
