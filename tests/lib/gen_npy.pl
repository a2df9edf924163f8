# tests/lib/gen_npy.pl FILE D0,D1,D2 SEED SCALE [SPIKE:PERIOD]: a float32 .npy of
# SCALE * N(0,1), every PERIOD-th element replaced by +-SPIKE (alternating). Deterministic
# (xorshift32 + Box-Muller), so the shell tests need no numpy. Run as
# perl -I tests/lib tests/lib/gen_npy.pl ... (npy.pl writes the file).
require "npy.pl";
my ($file, $shape, $seed, $scale, $spike) = @ARGV;
my @d = split /,/, $shape; my $n = 1; $n *= $_ for @d;
my $x = ($seed * 2654435761 + 12345) & 0xffffffff; $x = 1 if $x == 0;
sub nxt { $x ^= ($x << 13) & 0xffffffff; $x ^= $x >> 17; $x ^= ($x << 5) & 0xffffffff; return ($x + 0.5) / 4294967296.0; }
my @v;
for (my $i = 0; $i < $n; $i += 2) {
  my ($u1, $u2) = (nxt(), nxt()); my $r = sqrt(-2 * log($u1));
  push @v, $scale * $r * cos(6.283185307179586 * $u2), $scale * $r * sin(6.283185307179586 * $u2);
}
splice @v, $n;
if (defined $spike) { my ($sv, $per) = split /:/, $spike; for (my $i = 0; $i < $n; $i += $per) { $v[$i] = ($i / $per) % 2 ? -$sv : $sv; } }
npy_write($file, "<f4", "f<", \@d, @v);
