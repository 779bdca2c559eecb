(** Extraction of the proved functions to OCaml, for the oracle (oracle.ml speaks the
    JSON-lines protocol around them). Only Coq's own list, bool, option and pair types are
    mapped to OCaml's (ExtrOcamlBasic); integers stay Coq's binary Z, so no OCaml integer
    can overflow and no float is involved. *)
From Coq Require Import ZArith List Extraction ExtrOcamlBasic.
From Loam Require Import Values Merge Aggregate Partition.
Import ListNotations.
Open Scope Z_scope.

(** Decimal digits in and out, for the unproved JSON layer. *)
Definition z_of_digits (neg : bool) (ds : list Z) : Z :=
  let n := fold_left (fun acc d => acc * 10 + d) ds 0 in if neg then - n else n.

Fixpoint digits_aux (fuel : nat) (n : Z) (acc : list Z) : list Z :=
  match fuel with
  | O => n :: acc
  | S f => if n <? 10 then n :: acc else digits_aux f (n / 10) (n mod 10 :: acc)
  end.

Definition z_digits (n : Z) : list Z :=
  digits_aux (Pos.to_nat (Pos.size (Z.to_pos (Z.abs n)))) (Z.abs n) [].

Extraction Language OCaml.
Extraction "oracle_core.ml" merge_answer aggregate_answer check check_modulus z_of_digits z_digits Z.ltb Z.leb Z.eqb Z.add Z.sub.
