# tests/lib/npy.pl: the .npy writer of the shell tests' perl input generators (no numpy
# needed). A generator loads it with `require "npy.pl"` under `perl -I<tests/lib>`
# (cli_test.sh's cli_test_lib), then calls
#   npy_write(FILE, DESCR, PACK, [D0, D1, ...], VALUES...)
# DESCR the dtype ('<f4', '<i4', '<i8'), PACK its perl pack letter ("f<", "l<", "q<"); the
# header is format 1.0, keys in numpy's order, padded with spaces to a multiple of 64 bytes
# and ended by '\n' (a 1-D shape written "(N,)"), then the values little-endian, C order.
use strict;
use warnings;

sub npy_write {
  my ($file, $descr, $pack, $shape, @v) = @_;
  my @d = @$shape;
  my $h = "{'descr': '$descr', 'fortran_order': False, 'shape': (" . join(", ", @d) . (@d == 1 ? "," : "") . "), }";
  $h .= " " x (63 - (10 + length($h)) % 64) . "\n";
  open(my $f, ">", $file) or die "$file: $!";
  binmode $f;
  print $f "\x93NUMPY\x01\x00", pack("v", length($h)), $h, pack("$pack*", @v);
  close $f or die "$file: $!";
}

1;
