(** Extraction of the proved functions to OCaml, for the oracle (oracle.ml speaks the
    JSON-lines protocol around them). Only Coq's own list, bool, option and pair types are
    mapped to OCaml's (ExtrOcamlBasic); integers stay Coq's binary Z, so no OCaml integer
    can overflow and no float is involved. *)
From Coq Require Import ZArith List Extraction ExtrOcamlBasic.
From Loam Require Import Values Merge Aggregate Partition.
From Coq Require Import Lists.List.
Import ListNotations.
Open Scope Z_scope.

(** Decimal digits in and out, for the unproved JSON layer. *)
Definition z_of_digits (neg : bool) (ds : list Z) : Z :=
  let n := fold_left (fun acc d => acc * 10 + d) ds 0 in if neg then - n else n.

Fixpoint small_digits (fuel : nat) (n : Z) (acc : list Z) : list Z :=
  match fuel with
  | O => n :: acc
  | S f => if n <? 10 then n :: acc else small_digits f (n / 10) (n mod 10 :: acc)
  end.

(** The decimal digits of n >= 0, exactly [width] of them (zero-padded) when [width] is
    positive: split in halves by a power of ten, so a long number costs a few long divisions. *)
Fixpoint digits_aux (fuel : nat) (n width : Z) : list Z :=
  let pad ds := repeat 0 (Z.to_nat (width - Z.of_nat (length ds))) ++ ds in
  match fuel with
  | O => pad (small_digits 64 n [])
  | S f =>
      if n <? 10 ^ 18 then pad (small_digits 64 n []) else
      let k := ndigits n / 2 in
      let hi := digits_aux f (n / 10 ^ k) 0 in
      pad (hi ++ digits_aux f (n mod 10 ^ k) k)
  end.

Definition z_digits (n : Z) : list Z := digits_aux 40 (Z.abs n) 0.

Extraction Language OCaml.
Extraction "oracle_core.ml" merge_answer aggregate_answer check check_modulus z_of_digits z_digits Z.ltb Z.leb Z.eqb Z.add Z.sub.
